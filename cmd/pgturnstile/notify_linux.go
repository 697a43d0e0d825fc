package main

import (
	"strconv"
	"syscall"
	"unsafe"
)

// reloadingMessage is what Type=notify-reload expects before a reload:
// RELOADING=1 with the CLOCK_MONOTONIC time it began.
func reloadingMessage() string {
	const clockMonotonic = 1
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	usec := int64(ts.Sec)*1_000_000 + int64(ts.Nsec)/1000
	return "RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatInt(usec, 10)
}
