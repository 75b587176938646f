package commands

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/ratchet/ratchet/resp"
)

func cmdPing(_ *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if len(args) <= 2 && w.Proto() == 2 && s.subscribed() { // as Redis in RESP2 subscribed mode
		w.Array(2)
		w.BulkString("pong")
		if len(args) == 2 {
			w.Bulk(args[1])
		} else {
			w.BulkString("")
		}
		return
	}
	switch len(args) {
	case 1:
		w.Simple("PONG")
	case 2:
		w.Bulk(args[1])
	default:
		w.Error("ERR wrong number of arguments for 'ping' command")
	}
}

func cmdEcho(_ *Dispatcher, _ *Session, w *resp.Writer, args [][]byte) { w.Bulk(args[1]) }

func cmdQuit(_ *Dispatcher, s *Session, w *resp.Writer, _ [][]byte) {
	s.endTx() // as Redis: QUIT inside MULTI runs at once, and the transaction is gone
	s.Quit = true
	w.OK()
}

func cmdTime(_ *Dispatcher, _ *Session, w *resp.Writer, _ [][]byte) {
	now := time.Now()
	w.Array(2)
	w.BulkString(strconv.FormatInt(now.Unix(), 10))
	w.BulkString(strconv.FormatInt(int64(now.Nanosecond()/1000), 10))
}

func cmdSelect(_ *Dispatcher, _ *Session, w *resp.Writer, args [][]byte) {
	n, err := strconv.ParseInt(string(args[1]), 10, 64)
	switch {
	case err != nil:
		w.Error(errNotInt.Error())
	case n != 0:
		w.Error("ERR DB index is out of range")
	default:
		w.OK()
	}
}

func cmdAuth(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if len(args) > 3 {
		w.Error(errSyntax.Error())
		return
	}
	if def := d.acl.Load().def; def.nopass && len(args) == 2 {
		w.Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
		return
	}
	var user []byte
	if len(args) == 3 {
		user = args[1]
	}
	if !d.tryPassword(s, user, args[len(args)-1]) {
		w.Error(errWrongPass)
		return
	}
	s.Authed = true
	w.OK()
}

const errWrongPass = "WRONGPASS invalid username-password pair or user is disabled."

// tryPassword checks a password, whatever failed before, and records the outcome with the
// throttle (auth.go). It reports whether the connection may log in.
func (d *Dispatcher) tryPassword(s *Session, user, pass []byte) bool {
	st := d.acl.Load()
	u := st.login(user, pass)
	if u == nil {
		d.authFailed(s, d.clientAuth)
		return false
	}
	d.authSucceeded(s)
	s.setUser(st, u)
	return true
}

// cmdHello serves HELLO [protover [AUTH username password] [SETNAME clientname]].
func cmdHello(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	proto := w.Proto()
	if len(args) >= 2 {
		v, err := strconv.Atoi(string(args[1]))
		if err != nil {
			w.Error("ERR Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			w.Error("NOPROTO unsupported protocol version")
			return
		}
		proto = v
	}
	authed := s.Authed
	var name []byte
	hasName := false
	for i := 2; i < len(args); i++ {
		switch {
		case strings.EqualFold(string(args[i]), "AUTH") && i+2 < len(args):
			if !d.tryPassword(s, args[i+1], args[i+2]) {
				w.Error(errWrongPass)
				return
			}
			authed = true
			i += 2
		case strings.EqualFold(string(args[i]), "SETNAME") && i+1 < len(args):
			if msg := checkName(args[i+1]); msg != "" {
				w.Error(msg)
				return
			}
			name, hasName = args[i+1], true
			i++
		default:
			w.Error("ERR Syntax error in HELLO option '" + clip(args[i]) + "'")
			return
		}
	}
	if !authed && d.acl.Load().needAuth {
		w.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	s.Authed = authed
	if hasName {
		s.setName(string(name))
	}
	w.SetProto(proto)
	s.mu.Lock()
	s.proto = proto
	s.mu.Unlock()

	w.Map(7)
	w.BulkString("server")
	w.BulkString("ratchet")
	w.BulkString("version")
	w.BulkString(d.opt.Version)
	w.BulkString("proto")
	w.Int(int64(proto))
	w.BulkString("id")
	w.Int(s.ID)
	w.BulkString("mode")
	w.BulkString("standalone")
	w.BulkString("role")
	w.BulkString("master")
	w.BulkString("modules")
	w.Array(0)
}

// maxNameLen bounds a client name and the CLIENT SETINFO values, so that one CLIENT LIST
// line stays small (about 1.2 KB at most) and the whole reply at most --max-clients lines.
const maxNameLen = 256

// checkName returns the error for a client name that is too long or has spaces, newlines
// or other special bytes (as Redis refuses them); "" when it is valid.
func checkName(b []byte) string {
	switch {
	case len(b) > maxNameLen:
		return "ERR Client names must be at most 256 bytes."
	case !validName(b):
		return "ERR Client names cannot contain spaces, newlines or special characters."
	}
	return ""
}

// validName follows Redis: client names have no spaces, newlines or other special bytes.
func validName(b []byte) bool {
	for _, c := range b {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

func cmdClient(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	sub := strings.ToUpper(string(args[1]))
	switch {
	case sub == "ID" && len(args) == 2:
		w.Int(s.ID)
	case sub == "GETNAME" && len(args) == 2:
		if n := s.getName(); n != "" {
			w.BulkString(n)
		} else {
			w.Null()
		}
	case sub == "SETNAME" && len(args) == 3:
		if msg := checkName(args[2]); msg != "" {
			w.Error(msg)
			return
		}
		s.setName(string(args[2]))
		w.OK()
	case sub == "SETINFO" && len(args) == 4:
		attr := strings.ToUpper(string(args[2]))
		if attr != "LIB-NAME" && attr != "LIB-VER" {
			w.Error("ERR Unrecognized option '" + clip(args[2]) + "'")
			return
		}
		if len(args[3]) > maxNameLen || !validName(args[3]) {
			w.Error("ERR " + strings.ToLower(attr) + " must be at most 256 bytes, without spaces, newlines or special characters.")
			return
		}
		s.mu.Lock()
		if attr == "LIB-NAME" {
			s.libName = string(args[3])
		} else {
			s.libVer = string(args[3])
		}
		s.mu.Unlock()
		w.OK()
	case sub == "INFO" && len(args) == 2:
		w.BulkString(s.ClientLine(time.Now().UnixMilli()) + "\n")
	case sub == "LIST" && len(args) == 2:
		now := time.Now().UnixMilli()
		var b bytes.Buffer
		for _, o := range d.opt.Host.Sessions() {
			if o, ok := o.(*Session); ok {
				b.WriteString(o.ClientLine(now))
				b.WriteByte('\n')
			}
		}
		w.Bulk(b.Bytes())
	case (sub == "NO-EVICT" || sub == "NO-TOUCH") && len(args) == 3:
		w.OK()
	case sub == "TRACKING" && len(args) >= 3: // tracking.go
		d.clientTracking(s, w, args[2:])
	case sub == "CACHING" && len(args) == 3:
		clientCaching(s, w, args[2])
	case sub == "TRACKINGINFO" && len(args) == 2:
		clientTrackingInfo(s, w)
	case sub == "GETREDIR" && len(args) == 2:
		clientGetRedir(s, w)
	default:
		w.Error("ERR unknown subcommand or wrong number of arguments for '" + clip(args[1]) + "'. Try CLIENT HELP.")
	}
}
