package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// ovTuple is a tuple of the default workspace.
func ovTuple(ns, key string, w int64) engine.Tuple {
	return engine.Tuple{Workspace: "default", Namespace: ns, Key: []byte(key), WindowMs: w}
}

// ovSet is one override to set: a key ending in '*' is a prefix.
type ovSet struct {
	ns, key string
	w       int64
	limit   uint64
}

func (s ovSet) tuple() (engine.Tuple, bool) {
	if k := s.key; len(k) > 0 && k[len(k)-1] == '*' {
		return ovTuple(s.ns, k[:len(k)-1], s.w), true
	}
	return ovTuple(s.ns, s.key, s.w), false
}

func setAll(t *testing.T, o *engine.Overrides, sets []ovSet) {
	t.Helper()
	for _, s := range sets {
		tu, prefix := s.tuple()
		if err := o.Set(tu, prefix, s.limit); err != nil {
			t.Fatalf("Set %+v: %v", s, err)
		}
	}
}

// TestOverrideLookup: an exact override beats every prefix; among prefixes the longest
// wins; namespace, window and workspace are part of the match; a request without an
// override keeps its limit.
func TestOverrideLookup(t *testing.T) {
	sets := []ovSet{
		{"default", "user:42", 60_000, 5},
		{"default", "user:*", 60_000, 100},
		{"default", "user:4*", 60_000, 40},
		{"default", "*", 1000, 7},
		{"api", "user:*", 60_000, 1000},
	}
	cases := []struct {
		name string
		t    engine.Tuple
		want uint64 // 0: none, the request's 999 stays
	}{
		{"exact beats prefixes", ovTuple("default", "user:42", 60_000), 5},
		{"longest prefix", ovTuple("default", "user:43", 60_000), 40},
		{"shorter prefix", ovTuple("default", "user:9", 60_000), 100},
		{"a prefix matches the key equal to it", ovTuple("default", "user:", 60_000), 100},
		{"no prefix of the key", ovTuple("default", "other", 60_000), 0},
		{"another window", ovTuple("default", "user:42", 1000), 7},
		{"the empty prefix matches all in its window", ovTuple("default", "zzz", 1000), 7},
		{"another namespace", ovTuple("api", "user:42", 60_000), 1000},
		{"a namespace without overrides", ovTuple("web", "user:42", 60_000), 0},
		{"another workspace", engine.Tuple{Workspace: "acme", Namespace: "default", Key: []byte("user:42"), WindowMs: 60_000}, 0},
	}
	o := engine.NewOverrides(engine.NewManualClock(1000), "a", 0)
	setAll(t, o, sets)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, ok := o.Lookup(tc.t)
			if want := tc.want != 0; ok != want || l != tc.want {
				t.Errorf("Lookup = %d, %v; want %d, %v", l, ok, tc.want, want)
			}
			want := tc.want
			if want == 0 {
				want = 999
			}
			if got := o.Limit(tc.t, 999); got != want {
				t.Errorf("Limit = %d, want %d", got, want)
			}
		})
	}
}

// TestOverrideGetDel: GET reads the override set for that spelling (exact or prefix, not
// resolved); DEL removes one and reports it; after DEL the next longest prefix applies.
func TestOverrideGetDel(t *testing.T) {
	steps := []struct {
		op       string // get, del, lookup
		key      string
		want     uint64
		wantBool bool
	}{
		{"get", "user:42", 5, true},
		{"get", "user:*", 100, true},
		{"get", "user:4*", 40, true},
		{"get", "user:43", 0, false}, // GET does not resolve prefixes
		{"del", "user:42", 0, true},
		{"del", "user:42", 0, false},
		{"get", "user:42", 0, false},
		{"lookup", "user:42", 40, true},
		{"del", "user:4*", 0, true},
		{"lookup", "user:42", 100, true},
		{"del", "user:*", 0, true},
		{"lookup", "user:42", 0, false},
	}
	o := engine.NewOverrides(engine.NewManualClock(1000), "a", 0)
	setAll(t, o, []ovSet{{"default", "user:42", 60_000, 5}, {"default", "user:*", 60_000, 100}, {"default", "user:4*", 60_000, 40}})
	for i, st := range steps {
		tu, prefix := ovSet{"default", st.key, 60_000, 0}.tuple()
		var got uint64
		var ok bool
		switch st.op {
		case "get":
			got, ok = o.Get(tu, prefix)
		case "del":
			ok = o.Delete(tu, prefix)
		case "lookup":
			got, ok = o.Lookup(tu)
		}
		if got != st.want || ok != st.wantBool {
			t.Errorf("step %d %s %s = %d, %v; want %d, %v", i, st.op, st.key, got, ok, st.want, st.wantBool)
		}
	}
	if o.Len() != 0 {
		t.Errorf("Len = %d after deleting all", o.Len())
	}
}

// TestOverrideList: sorted by namespace, key and window; NS filters; MATCH sees a prefix's
// '*'; COUNT caps; workspaces never see each other's.
func TestOverrideList(t *testing.T) {
	o := engine.NewOverrides(engine.NewManualClock(1000), "a", 0)
	setAll(t, o, []ovSet{
		{"default", "b", 1000, 2}, {"default", "a", 60_000, 1}, {"default", "a", 1000, 3},
		{"default", "a*", 1000, 4}, {"api", "z", 1000, 5},
	})
	if err := o.Set(engine.Tuple{Workspace: "acme", Namespace: "default", Key: []byte("a"), WindowMs: 1000}, false, 9); err != nil {
		t.Fatal(err)
	}
	o.Delete(ovTuple("default", "b", 1000), false)
	glob := func(p string) func([]byte) bool {
		return func(k []byte) bool { // enough of a glob for the cases: "x*" and "*"
			return p == "*" || (p[len(p)-1] == '*' && bytes.HasPrefix(k, []byte(p[:len(p)-1]))) || string(k) == p
		}
	}
	cases := []struct {
		name  string
		ns    string
		match func([]byte) bool
		count int
		want  string
	}{
		{"all", "", nil, 0, "api/z/1000=5 default/a/1000=3 default/a/60000=1 default/a*/1000=4"},
		{"NS", "default", nil, 0, "default/a/1000=3 default/a/60000=1 default/a*/1000=4"},
		{"MATCH sees the star", "", glob("a*"), 0, "default/a/1000=3 default/a/60000=1 default/a*/1000=4"},
		{"MATCH exact", "", glob("a"), 0, "default/a/1000=3 default/a/60000=1"},
		{"COUNT", "", nil, 2, "api/z/1000=5 default/a/1000=3"},
		{"no such namespace", "web", nil, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []byte
			for i, ov := range o.List("default", tc.ns, tc.match, tc.count) {
				if i > 0 {
					got = append(got, ' ')
				}
				star := ""
				if ov.Prefix {
					star = "*"
				}
				got = fmt.Appendf(got, "%s/%s%s/%d=%d", ov.Tuple.Namespace, ov.Tuple.Key, star, ov.Tuple.WindowMs, ov.Limit)
			}
			if string(got) != tc.want {
				t.Errorf("List = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestOverrideBound: a new override beyond the bound is refused; replacing one is not; a
// deletion makes room; tombstones are bounded too.
func TestOverrideBound(t *testing.T) {
	o := engine.NewOverrides(engine.NewManualClock(1000), "a", 3)
	for i := range 3 {
		if err := o.Set(ovTuple("default", fmt.Sprint("k", i), 1000), false, 10); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{"a fourth is refused", func() error { return o.Set(ovTuple("default", "k3", 1000), false, 10) }, engine.ErrOverridesFull},
		{"a fourth prefix too", func() error { return o.Set(ovTuple("default", "k", 1000), true, 10) }, engine.ErrOverridesFull},
		{"replacing one is not", func() error { return o.Set(ovTuple("default", "k0", 1000), false, 20) }, nil},
		{"after a DEL there is room", func() error {
			o.Delete(ovTuple("default", "k0", 1000), false)
			return o.Set(ovTuple("default", "k3", 1000), false, 10)
		}, nil},
	}
	for _, st := range steps {
		if err := st.do(); !errors.Is(err, st.want) {
			t.Errorf("%s: %v, want %v", st.name, err, st.want)
		}
	}
	// Tombstones: many set-and-delete rounds keep at most the bound of them.
	for i := range 50 {
		tu := ovTuple("default", fmt.Sprint("t", i), 1000)
		o.Delete(ovTuple("default", "k1", 1000), false)
		if err := o.Set(tu, false, 1); err != nil {
			t.Fatal(err)
		}
		o.Delete(tu, false)
		if err := o.Set(ovTuple("default", "k1", 1000), false, 1); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for range o.Records {
		n++
	}
	if n > 3+3 {
		t.Errorf("%d records held, want at most 3 live and 3 tombstones", n)
	}
}

// TestOverrideMerge: copies converge whatever the order of merges: the greater (stamp,
// region) wins, a tombstone included; merging again changes nothing.
func TestOverrideMerge(t *testing.T) {
	clock := engine.NewManualClock(1000)
	a := engine.NewOverrides(clock, "a", 0)
	b := engine.NewOverrides(clock, "b", 0)
	k := ovTuple("default", "k", 1000)
	if err := a.Set(k, false, 10); err != nil {
		t.Fatal(err)
	}
	recsOf := func(o *engine.Overrides) []engine.OverrideRecord {
		recs, _ := o.Since(0, 0)
		return recs
	}
	if n := b.Merge(recsOf(a)); n != 1 {
		t.Fatalf("b took %d records from a, want 1", n)
	}
	clock.Advance(1)
	if err := b.Set(k, false, 20); err != nil { // later: wins
		t.Fatal(err)
	}
	aBefore := recsOf(a)
	if n := a.Merge(recsOf(b)); n != 1 {
		t.Fatalf("a took %d records from b, want 1", n)
	}
	if n := b.Merge(aBefore); n != 0 {
		t.Errorf("b took a's older record: %d", n)
	}
	for name, o := range map[string]*engine.Overrides{"a": a, "b": b} {
		if l, _ := o.Lookup(k); l != 20 {
			t.Errorf("%s: limit %d, want 20", name, l)
		}
	}
	clock.Advance(1)
	a.Delete(k, false)
	b.Merge(recsOf(a))
	a.Merge(recsOf(b))
	for name, o := range map[string]*engine.Overrides{"a": a, "b": b} {
		if _, ok := o.Lookup(k); ok {
			t.Errorf("%s: the deleted override is back", name)
		}
	}
	if n := b.Merge([]engine.OverrideRecord{aBefore[0]}); n != 0 {
		t.Errorf("an old record came back over the tombstone: %d", n)
	}
	// A malformed record is skipped.
	if n := b.Merge([]engine.OverrideRecord{{Key: []byte{0xff}, Limit: 1, Stamp: 1 << 62, Region: "x"}}); n != 0 {
		t.Errorf("a malformed record was taken: %d", n)
	}
}

// TestOverrideSince: Since returns the changes after a sequence, oldest first, in pages.
func TestOverrideSince(t *testing.T) {
	o := engine.NewOverrides(engine.NewManualClock(1000), "a", 0)
	setAll(t, o, []ovSet{{"default", "a", 1000, 1}, {"default", "b", 1000, 2}, {"default", "c", 1000, 3}})
	seq := o.Seq()
	setAll(t, o, []ovSet{{"default", "a", 1000, 4}}) // a moves to the end
	o.Delete(ovTuple("default", "b", 1000), false)
	recs, next := o.Since(seq, 0)
	if len(recs) != 2 || recs[0].Limit != 4 || recs[1].Limit != 0 || next != o.Seq() {
		t.Fatalf("Since(%d) = %+v, %d; want a=4 then b's tombstone, %d", seq, recs, next, o.Seq())
	}
	var all []uint64
	for s := uint64(0); ; {
		page, n := o.Since(s, 2)
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			all = append(all, r.Limit)
		}
		s = n
	}
	if fmt.Sprint(all) != "[3 4 0]" {
		t.Errorf("pages = %v, want [3 4 0] (c, a, b's tombstone)", all)
	}
}

// TestOverrideEngine: the engine's table marks the engine changed (a snapshot follows).
func TestOverrideEngine(t *testing.T) {
	e := engine.New(engine.NewManualClock(1000), engine.Config{})
	e.Changed()
	if err := e.Overrides().Set(ovTuple("default", "k", 1000), false, 3); err != nil {
		t.Fatal(err)
	}
	if !e.Changed() {
		t.Error("setting an override did not mark the engine changed")
	}
	if got := e.OverrideLimit(ovTuple("default", "k", 1000), 100); got != 3 {
		t.Errorf("OverrideLimit = %d, want 3", got)
	}
}

// TestOverrideFeed: every change of the origin's table is in the change feed, in the
// table's order, and OverrideList pages the table by sequence; a snapshot's restore is not
// in the feed.
func TestOverrideFeed(t *testing.T) {
	e := engine.New(engine.NewManualClock(1000), engine.Config{})
	o := e.Overrides()
	v0 := e.ChangeVersion()
	setAll(t, o, []ovSet{{"default", "a", 1000, 1}, {"default", "b*", 1000, 2}})
	o.Delete(ovTuple("default", "a", 1000), false)
	r := e.ChangesSince("", v0)
	var got []string
	for _, c := range r.Changes {
		rec, ok := engine.OverrideRecordOf(c)
		if !ok {
			t.Fatalf("change %+v is not an override's", c)
		}
		tu, _ := engine.ParseKey(rec.Key)
		got = append(got, fmt.Sprintf("%s%v=%d@%d", tu.Key, rec.Prefix, rec.Limit, rec.Stamp))
	}
	if want := "[afalse=1@1 btrue=2@2 afalse=0@3]"; fmt.Sprint(got) != want {
		t.Errorf("feed = %v, want %s", got, want)
	}
	l := e.OverrideList("", 0)
	if len(l.Changes) != 2 || l.Version != 3 || l.Changes[0].Version != 2 || l.Changes[1].Version != 3 {
		t.Errorf("OverrideList(0) = %+v, want b* at 2 and a's tombstone at 3, version 3", l)
	}
	if l := e.OverrideList("", 2); len(l.Changes) != 1 || l.Changes[0].Version != 3 {
		t.Errorf("OverrideList(2) = %+v, want a's tombstone", l)
	}

	e2 := engine.New(engine.NewManualClock(1000), engine.Config{})
	v := e2.ChangeVersion()
	recs, _ := o.Since(0, 0)
	if n := e2.RestoreOverrides(recs); n != 2 {
		t.Fatalf("restored %d records, want 2", n)
	}
	if e2.ChangeVersion() != v {
		t.Errorf("a restore entered the feed: version %d, was %d", e2.ChangeVersion(), v)
	}
	if l, ok := e2.Overrides().Lookup(ovTuple("default", "bz", 1000)); !ok || l != 2 {
		t.Errorf("restored prefix: %d, %v", l, ok)
	}
	if err := e2.Overrides().Set(ovTuple("default", "c", 1000), false, 5); err != nil || e2.ChangeVersion() != v+1 {
		t.Errorf("after a restore, a SET is in the feed again: %v, version %d, want %d", err, e2.ChangeVersion(), v+1)
	}
}
