package commands

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// The ACL file: a user's rules in Redis's syntax, applied in order, and the file of
// "user NAME rule..." lines (acl.go puts the users in force and checks them).

// aclMaxFile bounds the size of an ACL file.
const aclMaxFile = 16 << 20

// keyPattern is one key pattern of a user: ~pat (read and write), %R~pat, %W~pat.
type keyPattern struct {
	pat         []byte
	read, write bool
}

// aclUser is one user. It never changes once its state is in force.
type aclUser struct {
	name     string
	on       bool
	nopass   bool
	hashes   [][sha256.Size]byte // SHA-256 of the passwords
	allKeys  bool                // ~* or allkeys
	keys     []keyPattern
	allChans bool     // &* or allchannels
	chans    []string // &pattern
	cmds     bits     // the commands and subcommands allowed (aclTable's bits)
	allCmds  bool     // the command rules start from +@all, else from -@all
	rules    []string // the command rules since then, for ACL LIST
	open     bool     // every command on every key: nothing to check
}

// newACLUser returns a user as an ACL file line starts it: off, no password, no keys, no
// channels, no commands.
func newACLUser(name string) *aclUser {
	return &aclUser{name: name, cmds: newBits(len(aclCommands().names))}
}

// Errors of ACL rules, with Redis's wording.
var (
	errACLSyntax     = errors.New("Syntax error")
	errACLHash       = errors.New("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")
	errACLNoPassword = errors.New("The password you are trying to remove from the user does not exist")
	errACLAfterStar  = errors.New("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns")
	errACLSelectors  = errors.New("Ratchet does not support ACL selectors")
)

// errACLUnknown is the error of a rule naming no command or category.
func errACLUnknown(op string) error {
	return fmt.Errorf("Error in applying operation '%s': Unknown command or category name in ACL", op)
}

// apply applies one rule to u.
func (u *aclUser) apply(op string) error {
	t := aclCommands()
	lower := strings.ToLower(op)
	switch lower {
	case "on":
		u.on = true
	case "off":
		u.on = false
	case "nopass":
		u.nopass, u.hashes = true, nil
	case "resetpass":
		u.nopass, u.hashes = false, nil
	case "allkeys":
		u.allKeys, u.keys = true, nil
	case "resetkeys":
		u.allKeys, u.keys = false, nil
	case "allchannels":
		u.allChans, u.chans = true, nil
	case "resetchannels":
		u.allChans, u.chans = false, nil
	case "allcommands", "+@all":
		u.cmds.all(len(t.names), true)
		u.allCmds, u.rules = true, nil
	case "nocommands", "-@all":
		u.cmds.all(len(t.names), false)
		u.allCmds, u.rules = false, nil
	case "reset":
		for _, r := range []string{"resetpass", "resetkeys", "resetchannels", "off", "-@all"} {
			_ = u.apply(r)
		}
	case "sanitize-payload", "skip-sanitize-payload": // RESTORE's: nothing to sanitize here
	default:
		return u.applyArg(op, lower, t)
	}
	return nil
}

// applyArg applies a rule with an argument: a password, a pattern, a command or category.
func (u *aclUser) applyArg(op, lower string, t *aclTable) error {
	switch {
	case op == "":
		return errACLSyntax
	case op[0] == '>' || op[0] == '<':
		h := sha256.Sum256([]byte(op[1:]))
		return u.password(op[0] == '>', h)
	case op[0] == '#' || op[0] == '!':
		var h [sha256.Size]byte
		if len(op) != 65 || strings.ToLower(op[1:]) != op[1:] {
			return errACLHash
		}
		if _, err := hex.Decode(h[:], []byte(op[1:])); err != nil {
			return errACLHash
		}
		return u.password(op[0] == '#', h)
	case op[0] == '~':
		return u.keyPattern(op[1:], true, true)
	case op[0] == '%':
		perm, pat, ok := strings.Cut(op[1:], "~")
		r, w := strings.ContainsAny(perm, "Rr"), strings.ContainsAny(perm, "Ww")
		if !ok || perm == "" || strings.Trim(perm, "RWrw") != "" {
			return errACLSyntax
		}
		return u.keyPattern(pat, r, w)
	case op[0] == '&':
		if op[1:] == "*" {
			u.allChans, u.chans = true, nil
		} else if !u.allChans {
			u.chans = append(u.chans, op[1:])
		}
		return nil
	case op[0] == '(':
		return errACLSelectors
	case op[0] == '+' || op[0] == '-':
		return u.commandRule(op, lower, t)
	}
	return errACLSyntax
}

// password adds (or removes) the password hash h.
func (u *aclUser) password(add bool, h [sha256.Size]byte) error {
	for i, have := range u.hashes {
		if have == h {
			if !add {
				u.hashes = append(u.hashes[:i:i], u.hashes[i+1:]...)
			}
			return nil
		}
	}
	if !add {
		return errACLNoPassword
	}
	u.hashes, u.nopass = append(u.hashes, h), false
	return nil
}

// keyPattern adds a key pattern with the given permissions.
func (u *aclUser) keyPattern(pat string, read, write bool) error {
	if u.allKeys {
		return errACLAfterStar
	}
	if pat == "*" && read && write {
		u.allKeys, u.keys = true, nil
		return nil
	}
	u.keys = append(u.keys, keyPattern{pat: []byte(pat), read: read, write: write})
	return nil
}

// commandRule applies +cmd, -cmd, +cmd|sub, +@category, -@category.
func (u *aclUser) commandRule(op, lower string, t *aclTable) error {
	on := op[0] == '+'
	name := lower[1:]
	var set []int
	if cat, ok := strings.CutPrefix(name, "@"); ok {
		if !knownCategory(cat) {
			return errACLUnknown(op)
		}
		set = t.members[cat]
	} else {
		bit, ok := t.ids[name]
		if !ok {
			return errACLUnknown(op)
		}
		set = append(set, bit)
		if _, container := aclSubcommands[name]; container { // all its subcommands too
			for sub := range aclSubcommands[name] {
				set = append(set, t.ids[name+"|"+sub])
			}
		}
	}
	for _, b := range set {
		u.cmds.set(b, on)
	}
	u.rules = append(u.rules, lower)
	return nil
}

func knownCategory(cat string) bool {
	for _, c := range aclCategoryNames {
		if c == cat {
			return true
		}
	}
	return false
}

// seal computes what the checks read once all rules are applied.
func (u *aclUser) seal() *aclUser {
	u.open = u.allKeys && u.allChans && u.cmds.full(len(aclCommands().names))
	return u
}

// describe is u as a line of ACL LIST.
func (u *aclUser) describe() string {
	var b strings.Builder
	b.WriteString("user " + u.name)
	if u.on {
		b.WriteString(" on")
	} else {
		b.WriteString(" off")
	}
	if u.nopass {
		b.WriteString(" nopass")
	}
	for _, h := range u.hashes {
		b.WriteString(" #" + hex.EncodeToString(h[:]))
	}
	if u.allKeys {
		b.WriteString(" ~*")
	}
	for _, k := range u.keys {
		switch {
		case k.read && k.write:
			b.WriteString(" ~")
		case k.read:
			b.WriteString(" %R~")
		default:
			b.WriteString(" %W~")
		}
		b.Write(k.pat)
	}
	switch {
	case u.allChans:
		b.WriteString(" &*")
	default:
		b.WriteString(" resetchannels")
		for _, c := range u.chans {
			b.WriteString(" &" + c)
		}
	}
	if u.allCmds {
		b.WriteString(" +@all")
	} else {
		b.WriteString(" -@all")
	}
	for _, r := range u.rules {
		b.WriteString(" " + r)
	}
	return b.String()
}

// parseACL parses the text of an ACL file named name. Errors are reported as Redis does,
// every one with its file and line, and then nothing of the file is used.
func parseACL(name string, text []byte, requirePass string) (*aclState, error) {
	users := map[string]*aclUser{}
	var errs strings.Builder
	for i, line := range strings.Split(string(text), "\n") {
		line = strings.Trim(line, " \t\r\n")
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "user" {
			fmt.Fprintf(&errs, "%s:%d should start with user keyword followed by the username. ", name, i+1)
			continue
		}
		if users[f[1]] != nil {
			fmt.Fprintf(&errs, "WARNING: Duplicate user '%s' found on line %d. ", f[1], i+1)
			continue
		}
		u := newACLUser(f[1])
		for _, op := range f[2:] {
			if err := u.apply(op); err != nil {
				fmt.Fprintf(&errs, "%s:%d: %s. ", name, i+1, err)
			}
		}
		users[u.name] = u.seal()
	}
	if errs.Len() > 0 {
		return nil, errors.New(errs.String() + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
	}
	if users["default"] == nil {
		users["default"] = defaultUser(requirePass)
	}
	return newACLState(users, true), nil
}

// readACL reads and parses the ACL file path.
func readACL(path, requirePass string) (*aclState, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open ACL file: %w", err)
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, aclMaxFile+1))
	if err != nil {
		return nil, fmt.Errorf("read ACL file %s: %w", path, err)
	}
	if len(text) > aclMaxFile {
		return nil, fmt.Errorf("ACL file %s is larger than %d bytes", path, aclMaxFile)
	}
	return parseACL(path, text, requirePass)
}
