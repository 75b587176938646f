package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// saveRetry is how long a stopping origin waits between two attempts at a snapshot that
// failed (a full disk, say).
const saveRetry = time.Second

// errExitUnsaved is run's error when a second SIGTERM or SIGINT ends the process before a
// final snapshot could be written.
var errExitUnsaved = errors.New("exited at a second signal without a final snapshot")

// ignoreHangups logs and otherwise ignores SIGHUP, as Redis does: a closed terminal or a
// stray `kill -HUP` must not stop a server without its final snapshot. Each SIGHUP is one
// line at info. From the end of ctx on, SIGHUP is ignored without a line (run is then
// writing its final snapshot).
func ignoreHangups(ctx context.Context, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-ctx.Done():
				signal.Ignore(syscall.SIGHUP)
				signal.Stop(hup)
				return
			case <-hup:
				log.Info("SIGHUP ignored", "signal", "hangup")
			}
		}
	}()
}

// saveUntilDone writes a snapshot of n's origin (n.store must be set) and, while that
// fails, logs the error and tries again every saveRetry, until a save succeeds (nil) or a
// signal arrives on sig, during a save or between two: then it logs what is lost and
// returns errExitUnsaved at once (a save left running leaves its temporary file, which the
// next start removes). failed is the message of the error lines, which come after the 1st,
// 2nd, 4th, 8th, ... failure, so that a full disk does not fill the log.
func (n *node) saveUntilDone(sig <-chan os.Signal, failed string, log *slog.Logger) error {
	for attempt := 1; ; attempt++ {
		saved := make(chan error, 1)
		go func() { saved <- n.store.Write(snapshotSource(n.origin, nil)) }()
		var err error
		select {
		case err = <-saved:
		case s := <-sig:
			n.logUnsaved(s, log)
			return errExitUnsaved
		}
		if err == nil {
			if attempt > 1 {
				log.Info("snapshot written after failures", "attempts", attempt, "dir", n.store.Dir())
			}
			return nil
		}
		if attempt&(attempt-1) == 0 {
			log.Error(failed, "error", err, "attempts", attempt, "retry", saveRetry)
		}
		t := time.NewTimer(saveRetry)
		select {
		case s := <-sig:
			t.Stop()
			n.logUnsaved(s, log)
			return errExitUnsaved
		case <-t.C:
		}
	}
}

// logUnsaved says, at a second signal, what exiting without a final snapshot loses: the
// counts changed since the last successful save, which it dates.
func (n *node) logUnsaved(s os.Signal, log *slog.Logger) {
	st, es := n.store.Stats(), n.origin.Stats()
	args := []any{"signal", s.String(), "dir", n.store.Dir(), "failed_saves", st.ConsecutiveFailures,
		"cells_in_memory", es.Cells, "counter_keys_in_memory", es.KVKeys}
	if st.LastSuccessMs == 0 {
		args = append(args, "last_saved", "never")
	} else {
		last := time.UnixMilli(int64(st.LastSuccessMs))
		args = append(args, "last_saved", last.UTC().Format(time.RFC3339Nano),
			"unsaved_for", time.Since(last).Round(time.Millisecond).String())
	}
	log.Error("exiting without a final snapshot: counts changed since the last saved snapshot are lost", args...)
}
