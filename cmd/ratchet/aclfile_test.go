package main

import "testing"

// TestACLFileFlag: --aclfile and RATCHET_ACLFILE name the ACL file; the flag wins.
func TestACLFileFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, ""},
		{[]string{"--aclfile", "/etc/ratchet/users.acl"}, nil, "/etc/ratchet/users.acl"},
		{nil, map[string]string{"RATCHET_ACLFILE": "/a.acl"}, "/a.acl"},
		{[]string{"--aclfile=/b.acl"}, map[string]string{"RATCHET_ACLFILE": "/a.acl"}, "/b.acl"},
	} {
		c, err := parseConfig(tc.args, env(tc.env))
		if err != nil || c.ACLFile != tc.want {
			t.Errorf("args %v env %v: ACLFile %q, %v; want %q", tc.args, tc.env, c.ACLFile, err, tc.want)
		}
	}
}
