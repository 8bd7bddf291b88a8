// Package access is the lowest layer of tcc's Blackhole runtime: the host's
// view of one chip over PCIe. A Device hands out TLB windows; a Window is
// configured to point at one NoC endpoint (or a multicast rectangle of
// them) and an address there, and then reads and writes go through it.
// Nothing above this package knows whether the chip is a card behind the
// tt-kmd driver (package kmd), Tenstorrent's ttsim chip model loaded from a
// shared library (package ttsim), or the in-process fake used by tests
// (package fake).
//
// Back ends that expose the chip's BARs directly (ttsim, fake) implement BAR
// and get their windows from NewBARDevice, which programs the window
// registers in BAR0 exactly as the kernel driver does (EncodeTLB2M,
// EncodeTLB4G: tt-kmd blackhole.c TLB_2M_REG / TLB_4G_REG). The card back
// end asks the driver to allocate and configure windows instead.
//
// Simulated chips advance only when told: Device.Advance lets the chip run
// for some cycles and is called by every poll loop above; on a card it
// yields the CPU briefly.
package access
