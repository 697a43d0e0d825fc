//go:build !unix

package main

import "os"

// processMayExist: a pid the system cannot find is gone.
func processMayExist(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}
