package cli

import (
	"io"
	"os"
	"strconv"

	"golang.org/x/term"
)

// terminal reports whether w is a terminal (golang.org/x/term), and its
// width in columns: from the terminal, else $COLUMNS, else 80. Output
// that is not a terminal (a pipe, a file, a test) gets width 0.
func terminal(w io.Writer) (tty bool, width int) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, 0
	}
	if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
		return true, cols
	}
	if cols, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && cols > 0 {
		return true, cols
	}
	return true, 80
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	tty, _ := terminal(w)
	return tty
}

// helpWidth is the width --help wraps flag descriptions to: the
// terminal's (at most 120 columns), else 100.
func helpWidth() int {
	if _, w := terminal(os.Stdout); w > 0 {
		return min(w, 120)
	}
	return 100
}
