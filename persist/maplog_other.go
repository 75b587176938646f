//go:build !unix

package persist

import (
	"errors"
	"os"
)

// mapLog does not map here: the logs are read (readLog).
func mapLog(*os.File, int) ([]byte, error) { return nil, errors.ErrUnsupported }

// unmapLog is not called here.
func unmapLog([]byte) error { return nil }
