package commands

import (
	"crypto/sha256"
	"crypto/subtle"
	"sort"
	"strconv"
	"strings"

	"github.com/ratchet/ratchet/resp"
)

// Users and their permissions (ACL), in Redis's syntax (README "Users and ACLs"); the
// file and its rules are acl_file.go's, the categories acl_table.go's.
//
// Without --aclfile there is one user, default, with every permission and --requirepass
// as its password (none: no password). With --aclfile, each line of the file is
// "user NAME rule...", and a default user there replaces the built-in one. ACL LOAD
// re-reads the file; on any error it keeps the users it had.
//
// The users in force are one immutable aclState behind an atomic pointer. A connection
// holds its user and the state it was found in; after ACL LOAD it looks its user up again
// by name at its next command (a user removed or disabled meanwhile: the connection is
// answered an error and closed; Redis closes it at once). Without --aclfile a connection
// holds no user at all (nil: every permission), so the check on the hot path is one
// comparison; with it, one atomic load and a bool for a user with every permission.

// aclState is the set of users in force. It never changes once stored.
type aclState struct {
	users    map[string]*aclUser
	names    []string // sorted
	def      *aclUser // users["default"]
	fromFile bool     // read from --aclfile: connections hold their user
	needAuth bool     // a connection must AUTH before anything else
}

func newACLState(users map[string]*aclUser, fromFile bool) *aclState {
	st := &aclState{users: users, def: users["default"], fromFile: fromFile}
	for n := range users {
		st.names = append(st.names, n)
	}
	sort.Strings(st.names)
	st.needAuth = !st.def.on || !st.def.nopass
	return st
}

// defaultUser is the built-in default user: every permission, password requirePass
// (none when empty).
func defaultUser(requirePass string) *aclUser {
	u := newACLUser("default")
	for _, r := range []string{"on", "nopass", "allkeys", "allchannels", "+@all"} {
		_ = u.apply(r)
	}
	if requirePass != "" {
		_ = u.apply(">" + requirePass)
	}
	return u.seal()
}

// LoadACL reads Options.ACLFile and puts its users in force; without one it does
// nothing. On an error the users in force stay.
func (d *Dispatcher) LoadACL() error {
	if d.opt.ACLFile == "" {
		return nil
	}
	st, err := readACL(d.opt.ACLFile, d.opt.RequirePass)
	if err != nil {
		return err
	}
	d.acl.Store(st)
	return nil
}

// ctCompare is subtle.ConstantTimeCompare; a test sees what it is given.
var ctCompare = subtle.ConstantTimeCompare

// login returns the user name (nil: default) logs in as with pass, or nil. Every
// password of the user is compared, in constant time, as a SHA-256 hash.
func (st *aclState) login(name, pass []byte) *aclUser {
	if name == nil {
		name = []byte("default")
	}
	h := sha256.Sum256(pass)
	u := st.users[string(name)]
	if u == nil {
		return nil
	}
	match := 0
	for _, have := range u.hashes {
		match |= ctCompare(h[:], have[:])
	}
	if !u.on || (match == 0 && !u.nopass) {
		return nil
	}
	return u
}

// setUser makes u (of st) s's user.
func (s *Session) setUser(st *aclState, u *aclUser) {
	if st.fromFile {
		s.user, s.aclState = u, st
	} else {
		s.user, s.aclState = nil, nil // the only user, with every permission
	}
	s.mu.Lock()
	s.userName = u.name
	s.mu.Unlock()
}

// autoAuth logs s in as the default user when that needs no password; it reports
// whether s may run commands.
func (d *Dispatcher) autoAuth(s *Session) bool {
	st := d.acl.Load()
	if st.needAuth {
		return false
	}
	s.Authed = true
	s.setUser(st, st.def)
	return true
}

const errUserGone = "ERR this connection's user was removed or disabled by ACL LOAD"

// aclDenied returns the error for s running cmd with args, "" when its user may. Only
// called for a session holding a user (an ACL file is in force).
func (d *Dispatcher) aclDenied(s *Session, cmd *Command, args [][]byte) string {
	u := s.user
	if st := d.acl.Load(); st != s.aclState { // ACL LOAD: find the user again
		u = st.users[u.name]
		if u == nil || !u.on {
			s.Quit = true
			return errUserGone
		}
		s.user, s.aclState = u, st
	}
	switch denied, name := u.denies(cmd, args); denied {
	case aclNoCmd:
		return "NOPERM User " + u.name + " has no permissions to run the '" + name + "' command"
	case aclNoKey:
		return "NOPERM No permissions to access a key"
	}
	if !u.channelsAllowed(cmd, args) { // pubsub.go
		return "NOPERM this user has no permissions to access one of the channels used as arguments"
	}
	if d.opt.Forward != nil && !u.open && d.scriptOnEdgeUnchecked(u, cmd, args) {
		return "ERR on an edge, the commands of a script cannot be checked against user " + u.name +
			"'s ACL rules (its origin runs the script without the user): run it on the origin, or allow the user every command scripts may call"
	}
	return ""
}

// scriptOnEdgeUnchecked reports whether cmd with args is a script the interpreter would
// run for u on an edge's origin while u may not run some command a script may call: the
// origin, which runs it, does not know u, so the script's calls could not be checked as
// Redis checks them. (Its KEYS are checked here, with read and write, as EVAL's keys.)
func (d *Dispatcher) scriptOnEdgeUnchecked(u *aclUser, cmd *Command, args [][]byte) bool {
	if !strings.HasPrefix(cmd.Name, "eval") || len(args) < 3 || kvParsers[cmd.Name](args).lua == nil {
		return false
	}
	for name := range luaCommands() {
		if c := d.table[name]; c != nil && c.aclBit >= 0 && !u.cmds.has(c.aclBit) {
			return true
		}
	}
	c := d.table["time"]
	return c != nil && c.aclBit >= 0 && !u.cmds.has(c.aclBit)
}

// What aclUser.denies refuses.
const (
	aclAllowed = iota
	aclNoCmd   // the command (or subcommand) is not allowed
	aclNoKey   // a key is out of the user's patterns for the access the command needs
)

// denies reports whether u may run cmd (a row of the Dispatcher's table, bound by
// bindACL) with args: aclAllowed, or what it refuses and, for aclNoCmd, the command's
// ACL name ("client|list").
func (u *aclUser) denies(cmd *Command, args [][]byte) (int, string) {
	if u.open || cmd.aclBit < 0 {
		return aclAllowed, ""
	}
	bit, name := cmd.aclBit, cmd.Name
	if cmd.aclSubs != nil && len(args) > 1 {
		var lower [32]byte
		if sub := args[1]; len(sub) <= len(lower) {
			for i, c := range sub {
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				lower[i] = c
			}
			if b, ok := cmd.aclSubs[string(lower[:len(sub)])]; ok {
				bit, name = b, cmd.Name+"|"+string(lower[:len(sub)])
			}
		}
	}
	if !u.cmds.has(bit) {
		return aclNoCmd, name
	}
	if !u.allKeys && !u.keysAllowed(cmd, args) {
		return aclNoKey, ""
	}
	return aclAllowed, ""
}

// keysAllowed reports whether u may touch every key of a request to cmd: read-only
// commands need a pattern granting read, write commands one granting write, others both.
// WATCH needs only a pattern matching its keys (%R~ or %W~ will do): its key spec in
// Redis 7 is RO without ACCESS, which asks for no permission but a match.
// RL.LIMIT's, RL.STATUS's, RL.RESET's and RL.OVERRIDE's key in a namespace other than the
// default is matched as "namespace:key" (with every NS given, when several are);
// RL.OVERRIDE SET and DEL need write, GET read, LIST nothing (as KEYS).
func (u *aclUser) keysAllowed(cmd *Command, args [][]byte) bool {
	read, write := cmd.Flags&flagWrite == 0, cmd.Flags&flagReadonly == 0
	switch cmd.Name {
	case "rl.limit", "rl.status", "rl.reset":
		return u.nsKeyAllowed(args[1], args[2:], read, write)
	case "rl.override":
		if len(args) < 3 {
			return true // the command answers the error
		}
		switch strings.ToLower(string(args[1])) {
		case "set", "del":
			read, write = false, true
		case "get":
			read, write = true, false
		default: // LIST filters nothing by key pattern, as KEYS (README "Overrides")
			return true
		}
		return u.nsKeyAllowed(args[2], args[3:], read, write)
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		n, err := strconv.Atoi(string(args[2]))
		if err != nil || n < 0 || n > len(args)-3 {
			return true // no keys: the command answers the error
		}
		return u.keysIn(args[3:3+n], read, write)
	case "watch":
		for _, k := range args[1:] {
			if !u.keyMatched(k) {
				return false
			}
		}
		return true
	}
	if cmd.FirstKey <= 0 || cmd.FirstKey >= len(args) {
		return true
	}
	last := cmd.FirstKey
	if cmd.LastKey < 0 {
		last = len(args) + cmd.LastKey
	}
	if cmd.KeyStep > 1 { // MSET's keys are every other argument
		for i := cmd.FirstKey; i <= last; i += cmd.KeyStep {
			if !u.keyAllowed(args[i], read, write) {
				return false
			}
		}
		return true
	}
	return u.keysIn(args[cmd.FirstKey:last+1], read, write)
}

// nsKeyAllowed reports whether u may touch key of an RL command whose options are rest:
// in a namespace other than the default, as "namespace:key" (with every NS of rest, when
// several are). A prefix's key ("prefix*") is matched as written.
func (u *aclUser) nsKeyAllowed(key []byte, rest [][]byte, read, write bool) bool {
	named := false
	var buf [256]byte // "ns:key" without allocating, for most
	for i := 0; i+1 < len(rest); i++ {
		if len(rest[i]) != 2 || !strings.EqualFold(string(rest[i]), "NS") {
			continue
		}
		named = true
		k := key
		if ns := rest[i+1]; string(ns) != DefaultNamespace {
			k = append(append(append(buf[:0], ns...), ':'), key...)
		}
		if !u.keyAllowed(k, read, write) {
			return false
		}
	}
	return named || u.keyAllowed(key, read, write)
}

func (u *aclUser) keysIn(keys [][]byte, read, write bool) bool {
	for _, k := range keys {
		if !u.keyAllowed(k, read, write) {
			return false
		}
	}
	return true
}

// keyAllowed reports whether u's patterns grant the access asked to key.
func (u *aclUser) keyAllowed(key []byte, read, write bool) bool {
	var r, w bool
	for _, k := range u.keys {
		if globMatch(k.pat, key) {
			r, w = r || k.read, w || k.write
		}
	}
	return (r || !read) && (w || !write)
}

// keyMatched reports whether one of u's patterns matches key, whatever it grants.
func (u *aclUser) keyMatched(key []byte) bool {
	for _, k := range u.keys {
		if globMatch(k.pat, key) {
			return true
		}
	}
	return false
}

// bindACL numbers the table's commands for the ACL checks: RL.INTERNAL.* and the commands
// allowed before AUTH are never checked (bit -1).
func bindACL(c *Command) {
	t := aclCommands()
	c.aclBit = -1
	if strings.HasPrefix(c.Name, "rl.internal.") || c.Flags&flagNoAuth != 0 {
		return
	}
	if b, ok := t.ids[c.Name]; ok {
		c.aclBit = b
	}
	if subs, ok := aclSubcommands[c.Name]; ok {
		c.aclSubs = make(map[string]int, len(subs))
		for sub := range subs {
			c.aclSubs[sub] = t.ids[c.Name+"|"+sub]
		}
	}
}

// aclCommand is the ACL command's row.
func aclCommand() *Command {
	return &Command{Name: "acl", Arity: -2, Group: "server", Summary: "ACL WHOAMI, LIST, USERS, CAT, LOAD.",
		Args: []ArgDoc{{Name: "subcommand", Type: "string"}}, Handler: cmdACL}
}

const errACLNoFile = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."

// cmdACL serves ACL WHOAMI, LIST, USERS, CAT [category] and LOAD; the subcommands that
// change users in memory are refused: users come from the file.
func cmdACL(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	arity := map[string]int{"whoami": 2, "list": 2, "users": 2, "load": 2, "save": 2}[sub]
	if sub == "cat" {
		arity = -2
	}
	if (arity > 0 && len(args) != arity) || (sub == "cat" && len(args) > 3) {
		w.Error("ERR wrong number of arguments for 'acl|" + sub + "' command")
		return
	}
	st := d.acl.Load()
	switch sub {
	case "whoami":
		s.mu.Lock()
		name := s.userName
		s.mu.Unlock()
		if name == "" {
			name = "default"
		}
		w.BulkString(name)
	case "users":
		w.Array(len(st.names))
		for _, n := range st.names {
			w.BulkString(n)
		}
	case "list":
		w.Array(len(st.names))
		for _, n := range st.names {
			w.BulkString(st.users[n].describe())
		}
	case "cat":
		aclCat(w, args[2:])
	case "load":
		if d.opt.ACLFile == "" {
			w.Error(errACLNoFile)
			return
		}
		if err := d.LoadACL(); err != nil {
			w.Error("ERR " + err.Error())
			return
		}
		w.OK()
	case "setuser", "deluser", "getuser", "save", "log", "genpass", "dryrun":
		w.Error("ERR ACL " + strings.ToUpper(sub) + " is not supported: Ratchet's users come from --aclfile (edit it, then ACL LOAD)")
	default:
		w.Error("ERR unknown subcommand '" + clip(args[1]) + "'. Try ACL HELP.")
	}
}

// aclCat answers ACL CAT: the categories, or the commands of one.
func aclCat(w *resp.Writer, args [][]byte) {
	if len(args) == 0 {
		w.Array(len(aclCategoryNames))
		for _, c := range aclCategoryNames {
			w.BulkString(c)
		}
		return
	}
	cat := strings.ToLower(string(args[0]))
	if !knownCategory(cat) {
		w.Error("ERR Unknown category '" + clip(args[0]) + "'")
		return
	}
	t := aclCommands()
	w.Array(len(t.members[cat]))
	for _, b := range t.members[cat] {
		w.BulkString(t.names[b])
	}
}
