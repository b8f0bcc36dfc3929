package vfs

import (
	"errors"
	"syscall"
)

// IsNoSpace reports whether err says the disk is full: no block left (ENOSPC) or the owner's
// quota used up (EDQUOT). Writes that fail so can succeed once space is freed, so a caller that
// can wait (a periodic writer, dispatch) treats them as a pause rather than a failure.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
