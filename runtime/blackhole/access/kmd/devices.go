package kmd

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// Devices lists the device nodes of the driver, sorted by number. It
// returns an error saying what to install when there are none.
func Devices() ([]string, error) {
	ents, err := os.ReadDir(DevDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("no %s device exists: %s", DevDir, Install)
		}
		return nil, fmt.Errorf("kmd: %w", err)
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, filepath.Join(DevDir, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s device exists (%s is empty): %s", DevDir, DevDir, Install)
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(out[i]))
		b, _ := strconv.Atoi(filepath.Base(out[j]))
		return a < b
	})
	return out, nil
}
