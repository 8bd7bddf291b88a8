package kmd

import (
	"os"
	"strings"
	"testing"
)

// On machines without a card the errors say so in one line and say what to install.
func TestNoCard(t *testing.T) {
	if _, err := os.Stat(DevDir); err == nil {
		t.Skipf("%s exists on this machine", DevDir)
	}
	_, err := Devices()
	if err == nil || !strings.Contains(err.Error(), "no /dev/tenstorrent device exists") || !strings.Contains(err.Error(), "tt-kmd") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Devices() = %v", err)
	}
	_, err = Open(DevDir + "/0")
	if err == nil || !strings.Contains(err.Error(), "no /dev/tenstorrent/0 device exists") {
		t.Errorf("Open = %v", err)
	}
}
