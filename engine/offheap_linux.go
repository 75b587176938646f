//go:build linux && !race

package engine

import "syscall"

// mapPopulate asks mmap for the pages of a mapping at once (an index: every page of it is
// written soon after, and a page first read maps the zero page, which the first write then
// copies, with a TLB flush on every core).
const mapPopulate = syscall.MAP_POPULATE
