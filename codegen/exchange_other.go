//go:build !linux

package codegen

import "errors"

// errNoExchange says the OS cannot swap two directories atomically.
var errNoExchange = errors.New("no atomic exchange")

// exchange is unavailable here; WriteDir falls back to two renames.
func exchange(a, b string) error { return errNoExchange }
