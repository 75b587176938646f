package persist

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	// corruptPrefix begins the name of a snapshot that failed to load and was moved aside:
	// snapshot.db.corrupt-<unix seconds>, with ".1", ".2", ... when that name is taken.
	corruptPrefix = fileName + ".corrupt-"
	// keepCorrupt is how many snapshots moved aside are kept; older ones are deleted.
	keepCorrupt = 3
)

// ErrNotSetAside is wrapped by LoadOrSetAside's error when a snapshot failed to load and
// could not be moved aside either: the next save would overwrite it.
var ErrNotSetAside = errors.New("snapshot neither loaded nor moved aside")

// LoadOrSetAside is LoadAll for a process that starts. A snapshot that fails to load (damaged,
// foreign, of another format version, unreadable) is renamed to snapshot.db.corrupt-<unix seconds> before any save can
// overwrite it, logged with both paths and the load error, and LoadOrSetAside returns no
// snapshot and no error: the process starts empty, and an operator can still recover the
// file. The newest keepCorrupt files moved aside are kept, older ones deleted. When the
// file can be neither loaded nor moved, the error wraps ErrNotSetAside and the caller
// should not start (its first save would destroy the file).
//
// Unlike LoadAll's, its cells are in file order, records of one key and sequence not
// merged: engine.Restore merges them (with max, as LoadAll does), and sorting them was
// most of a load (1M cells: 520 of 840 ms).
func (s *Store) LoadOrSetAside() (Snapshot, error) {
	snap, loadErr := s.loadAll(false, true)
	if loadErr == nil {
		return snap, nil
	}
	return Snapshot{}, s.aside(loadErr)
}

// aside moves the snapshot that failed to load with loadErr aside, logs it and prunes the
// files moved aside before: LoadOrSetAside's and OpenOrSetAside's. Its error wraps
// ErrNotSetAside.
func (s *Store) aside(loadErr error) error {
	path := filepath.Join(s.dir, fileName)
	dst, err := s.setAside(path, time.Now())
	if err != nil {
		return fmt.Errorf("%w: %w (moving it aside failed: %w)", ErrNotSetAside, loadErr, err)
	}
	msg, attrs := "snapshot not loaded; moved aside, starting empty", []any{"path", path, "moved_to", dst}
	if verr := (*versionError)(nil); errors.As(loadErr, &verr) {
		msg = "snapshot of another format version not loaded; moved aside, starting empty"
		attrs = append(attrs, "found_version", verr.found, "want_version", verr.want)
	}
	s.log.Error(msg, append(attrs, "error", loadErr)...)
	s.pruneAside()
	return nil
}

// KeepAside keeps a copy of the snapshot (a hard link under a set-aside name, as a
// snapshot that failed to load gets) when a lazy load could not restore all of its cells
// (loadErr): the next save replaces the file, and would otherwise destroy the only copy of
// the cells that did not load. It logs both paths and prunes the files kept aside.
func (s *Store) KeepAside(loadErr error) error {
	path := filepath.Join(s.dir, fileName)
	dst, err := s.placeAside(path, time.Now(), os.Link)
	if err != nil {
		return fmt.Errorf("keep %s aside: %w", path, err)
	}
	s.log.Error("snapshot cells not all loaded; a copy of the snapshot kept aside", "path", path, "kept_as", dst, "error", loadErr)
	s.pruneAside()
	return nil
}

// setAside renames path to a free corruptPrefix name of now and syncs the directory.
func (s *Store) setAside(path string, now time.Time) (string, error) {
	return s.placeAside(path, now, os.Rename)
}

// placeAside puts path at a free corruptPrefix name of now with place (a rename or a
// link) and syncs the directory.
func (s *Store) placeAside(path string, now time.Time, place func(oldpath, newpath string) error) (string, error) {
	base := filepath.Join(s.dir, corruptPrefix+strconv.FormatInt(now.Unix(), 10))
	for i := 0; i < 100; i++ {
		dst := base
		if i > 0 {
			dst += "." + strconv.Itoa(i)
		}
		if _, err := os.Lstat(dst); err == nil {
			continue // taken: never replace a file moved aside earlier
		}
		if err := place(path, dst); err != nil {
			return "", fmt.Errorf("place %s at %s: %w", path, dst, err)
		}
		return dst, syncDir(s.dir)
	}
	return "", fmt.Errorf("no free name for %s", base)
}

// pruneAside deletes the files moved aside but the keepCorrupt newest (by the time in
// their names), logging each.
func (s *Store) pruneAside() {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		s.log.Warn("cannot list snapshots moved aside", "dir", s.dir, "error", err)
		return
	}
	type aside struct {
		name     string
		sec, seq int64
	}
	var all []aside
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), corruptPrefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		secStr, seqStr, _ := strings.Cut(rest, ".")
		sec, err := strconv.ParseInt(secStr, 10, 64)
		if err != nil {
			continue // not a name setAside makes: leave it alone
		}
		seq, _ := strconv.ParseInt(seqStr, 10, 64)
		all = append(all, aside{e.Name(), sec, seq})
	}
	if len(all) <= keepCorrupt {
		return
	}
	slices.SortFunc(all, func(a, b aside) int { return cmp.Or(cmp.Compare(a.sec, b.sec), cmp.Compare(a.seq, b.seq)) })
	for _, a := range all[:len(all)-keepCorrupt] {
		p := filepath.Join(s.dir, a.name)
		if err := os.Remove(p); err != nil {
			s.log.Warn("cannot delete an old snapshot moved aside", "path", p, "error", err)
			continue
		}
		s.log.Info("deleted an old snapshot moved aside", "path", p, "kept", keepCorrupt)
	}
}
