package scripting_test

import (
	"context"
	"testing"

	"github.com/ratchet/ratchet/scripting"
)

// cancelOnCall is a Caller that cancels the run's context at the script's first call: the
// caller hangs up while the script ends.
type cancelOnCall struct {
	*fakeKeys
	cancel context.CancelFunc
}

func (c cancelOnCall) Call(args [][]byte, proto int) (scripting.Reply, bool) {
	c.cancel()
	return c.fakeKeys.Call(args, proto)
}

// TestCancelledRunStateNotPooled: when the caller's context is cancelled while its script
// runs, the stop that cancel sets off may land after the script ended; the interpreter is
// then not pooled, so that the stop cannot end the next script run on it. One idle state,
// so the next run would get this one's.
func TestCancelledRunStateNotPooled(t *testing.T) {
	e := scripting.New(scripting.Config{MaxIdle: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.Run(ctx, scripting.Request{Body: []byte("redis.call('ping') return 1")}, cancelOnCall{newFake(), cancel})
	if n := scripting.IdleStates(e); n != 0 {
		t.Errorf("%d interpreters pooled after a run whose context was cancelled, want 0", n)
	}
	if got := evalString(e, "return 2", nil, nil); got != ":2\r\n" {
		t.Errorf("the next run = %q, want :2", got)
	}
}
