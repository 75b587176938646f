package commands

import (
	"sort"
	"strings"
	"sync"
)

// ACL categories of the command table, as Redis 7 assigns them to the same commands
// (COMMAND INFO's categories), and @ratelimit for Ratchet's own. Container commands
// (ACL, CLIENT, COMMAND, CONFIG, SCRIPT) are categorised per subcommand, as in Redis,
// where an ACL rule may name one (+config|get). RL.INTERNAL.* commands have no
// categories: the cluster secret governs them, never an ACL user.

// aclCategoryNames are the categories ACL CAT lists, in its order: Redis 7's, then
// ratelimit. Rules may name any of them; those of data types Ratchet does not hold
// are empty.
var aclCategoryNames = []string{"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous",
	"connection", "transaction", "scripting", "ratelimit"}

// aclCommandCategories are the categories of each command that is not a container.
var aclCommandCategories = map[string]string{
	"rl.limit":    "write ratelimit fast",
	"rl.status":   "read ratelimit fast",
	"rl.reset":    "write ratelimit fast",
	"cl.throttle": "write ratelimit slow",

	"get": "read string fast", "set": "write string slow", "setex": "write string slow", "psetex": "write string slow",
	"incr": "write string fast", "decr": "write string fast", "incrby": "write string fast", "decrby": "write string fast",
	"expire": "keyspace write fast", "pexpire": "keyspace write fast", "expireat": "keyspace write fast",
	"pexpireat": "keyspace write fast", "persist": "keyspace write fast",
	"ttl": "keyspace read fast", "pttl": "keyspace read fast", "del": "keyspace write slow",
	"unlink": "keyspace write fast", "exists": "keyspace read fast", "type": "keyspace read fast",
	"scan": "keyspace read slow", "dbsize": "keyspace read fast",
	"keys": "keyspace read slow dangerous", "flushall": "keyspace write slow dangerous",
	"flushdb": "keyspace write slow dangerous",

	"setnx": "write string fast", "strlen": "read string fast", "mget": "read string fast", "mset": "write string slow",
	"getset": "write string fast", "getdel": "write string fast", "getex": "write string fast",
	"incrbyfloat": "write string fast", "append": "write string fast",

	"hget": "read hash fast", "hset": "write hash fast", "hmset": "write hash fast", "hsetnx": "write hash fast",
	"hmget": "read hash fast", "hincrby": "write hash fast", "hincrbyfloat": "write hash fast", "hdel": "write hash fast",
	"hgetall": "read hash slow", "hkeys": "read hash slow", "hvals": "read hash slow", "hexists": "read hash fast",
	"hlen": "read hash fast",

	"lpush": "write list fast", "rpush": "write list fast", "lpop": "write list fast", "rpop": "write list fast",
	"lrange": "read list slow", "ltrim": "write list slow", "llen": "read list fast", "lindex": "read list slow",
	"lset": "write list slow", "lrem": "write list slow",

	"sadd": "write set fast", "srem": "write set fast", "scard": "read set fast", "sismember": "read set fast",
	"smembers": "read set slow",

	"zadd": "write sortedset fast", "zincrby": "write sortedset fast", "zrem": "write sortedset fast",
	"zremrangebyscore": "write sortedset slow", "zremrangebyrank": "write sortedset slow", "zcard": "read sortedset fast",
	"zcount": "read sortedset fast", "zscore": "read sortedset fast", "zrank": "read sortedset fast",
	"zrevrank": "read sortedset fast", "zrange": "read sortedset slow", "zrangebyscore": "read sortedset slow",
	"zrevrangebyscore": "read sortedset slow", "zrevrange": "read sortedset slow",

	"ping": "fast connection", "echo": "fast connection", "quit": "fast connection", "hello": "fast connection",
	"auth": "fast connection", "select": "fast connection", "time": "fast", "info": "slow dangerous",

	"multi": "fast transaction", "exec": "slow transaction", "discard": "fast transaction",
	"watch": "fast transaction", "unwatch": "fast transaction",

	// The containers themselves (bare COMMAND runs; the others need a subcommand).
	"command": "slow connection", "acl": "slow", "client": "slow", "config": "slow", "script": "slow",
	"rl.override": "slow",

	"eval": "slow scripting", "evalsha": "slow scripting", "eval_ro": "slow scripting", "evalsha_ro": "slow scripting",

	"subscribe": "pubsub slow", "psubscribe": "pubsub slow", "unsubscribe": "pubsub slow",
	"punsubscribe": "pubsub slow", "publish": "pubsub fast", "pubsub": "slow",
}

// aclSubcommands are the categories of each container command's subcommands.
var aclSubcommands = map[string]map[string]string{
	"acl": {"whoami": "slow", "cat": "slow", "list": "admin slow dangerous", "users": "admin slow dangerous",
		"load": "admin slow dangerous", "save": "admin slow dangerous", "setuser": "admin slow dangerous",
		"deluser": "admin slow dangerous", "getuser": "admin slow dangerous", "log": "admin slow dangerous",
		"genpass": "slow", "dryrun": "admin slow dangerous", "help": "slow"},
	"client": {"list": "admin slow dangerous connection", "no-evict": "admin slow dangerous connection",
		"id": "slow connection", "getname": "slow connection", "setname": "slow connection",
		"setinfo": "slow connection", "info": "slow connection", "tracking": "slow connection",
		"caching": "slow connection", "trackinginfo": "slow connection", "getredir": "slow connection",
		"no-touch": "slow connection"},
	"command": {"count": "slow connection", "list": "slow connection", "info": "slow connection",
		"docs": "slow connection"},
	"config": {"get": "admin slow dangerous", "set": "admin slow dangerous", "resetstat": "admin slow dangerous",
		"rewrite": "admin slow dangerous"},
	"script": {"load": "slow scripting", "exists": "slow scripting", "flush": "slow scripting",
		"kill": "slow scripting"},
	"pubsub": {"channels": "pubsub slow", "numsub": "pubsub slow", "numpat": "pubsub slow", "help": "slow"},
	// RL.OVERRIDE changes every client's limits: SET and DEL are for administrators, and
	// not in @ratelimit, which applications are granted (they must not raise their own).
	"rl.override": {"set": "write admin dangerous slow", "del": "write admin dangerous slow",
		"get": "read ratelimit slow", "list": "read ratelimit slow"},
}

// aclTable numbers every command and subcommand an ACL rule can name (the bits of a
// user's command set) and lists each category's members.
type aclTable struct {
	ids     map[string]int   // "get", "client|list" -> bit
	names   []string         // bit -> name
	members map[string][]int // category -> bits, in names' order
}

var (
	aclTableOnce  sync.Once
	aclTableBuilt *aclTable
)

// aclCommands is the table, built once from the command table's rows.
func aclCommands() *aclTable {
	aclTableOnce.Do(func() { aclTableBuilt = buildACLTable() })
	return aclTableBuilt
}

func buildACLTable() *aclTable {
	t := &aclTable{ids: map[string]int{}, members: map[string][]int{}}
	var names []string
	cats := map[string]string{}
	for _, c := range append(commandTable(), kvCommands()...) {
		if subs, ok := aclSubcommands[c.Name]; ok {
			names = append(names, c.Name)
			cats[c.Name] = aclCommandCategories[c.Name] // the bare container
			for sub, cat := range subs {
				names = append(names, c.Name+"|"+sub)
				cats[c.Name+"|"+sub] = cat
			}
			continue
		}
		names = append(names, c.Name)
		if cat, ok := aclCommandCategories[c.Name]; ok {
			cats[c.Name] = cat
		} else {
			cats[c.Name] = flagCategories(c.Flags) // a row without an entry above
		}
	}
	sort.Strings(names)
	for i, n := range names {
		t.ids[n] = i
		t.names = append(t.names, n)
		for _, cat := range strings.Fields(cats[n]) {
			t.members[cat] = append(t.members[cat], i)
		}
	}
	return t
}

// flagCategories are the categories Redis derives from a command's flags.
func flagCategories(f cmdFlags) string {
	var out []string
	if f&flagWrite != 0 {
		out = append(out, "write")
	}
	if f&flagReadonly != 0 {
		out = append(out, "read")
	}
	if f&flagFast != 0 {
		out = append(out, "fast")
	} else {
		out = append(out, "slow")
	}
	return strings.Join(out, " ")
}

// categoriesOf returns the categories of the command or subcommand named name ("" when
// it has none), for COMMAND INFO.
func categoriesOf(name string) []string {
	if c, ok := aclCommandCategories[name]; ok {
		return strings.Fields(c)
	}
	return nil
}

// bits is a set of command bits.
type bits []uint64

func newBits(n int) bits { return make(bits, (n+63)/64) }

func (b bits) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

func (b bits) set(i int, on bool) {
	if on {
		b[i/64] |= 1 << (i % 64)
	} else {
		b[i/64] &^= 1 << (i % 64)
	}
}

func (b bits) all(n int, on bool) {
	for i := range n {
		b.set(i, on)
	}
}

// full reports whether every one of n bits is set.
func (b bits) full(n int) bool {
	for i := range n {
		if !b.has(i) {
			return false
		}
	}
	return true
}
