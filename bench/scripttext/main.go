// Command scripttext prints the Lua text of a limiter script Ratchet knows, by SHA1, as
// the library sends it (no newline added), so that a benchmark can load the very text into
// redis-server:
//
//	go run ./bench/scripttext f52a5b566060d79fd321d695df55bc918339c4aa | redis-cli -x SCRIPT LOAD
package main

import (
	"fmt"
	"os"

	"github.com/ratchet/ratchet/commands"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: scripttext SHA1")
		os.Exit(2)
	}
	for _, s := range commands.KnownScripts() {
		if s.SHA1 == os.Args[1] {
			fmt.Print(s.Text)
			return
		}
	}
	fmt.Fprintf(os.Stderr, "scripttext: %s is not a script Ratchet knows\n", os.Args[1])
	os.Exit(1)
}
