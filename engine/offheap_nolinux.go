//go:build unix && !linux && !race

package engine

// mapPopulate is 0: a mapping's pages come as they are touched.
const mapPopulate = 0
