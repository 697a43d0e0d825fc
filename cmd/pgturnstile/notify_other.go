//go:build !linux

package main

// reloadingMessage is what Type=notify-reload expects before a reload.
// systemd runs only on Linux; elsewhere NOTIFY_SOCKET is not expected to
// be set, and the message goes without MONOTONIC_USEC.
func reloadingMessage() string { return "RELOADING=1" }
