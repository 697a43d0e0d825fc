// Package errtext writes system errors in the C library's words.
//
// Go's syscall.Errno texts are glibc's in lower case ("no such file or
// directory"); PgBouncer's log lines, and the log watchers written for
// them, have glibc's strerror text ("No such file or directory"). Line
// rewrites the Go text of the common errnos in a log line to glibc's; the
// command's log handlers pass every message through it, so that no call
// site has to.
package errtext

import (
	"strings"
	"syscall"
)

// glibc is strerror's text, as glibc prints it, of the errnos a pooler's
// log lines carry: files, sockets, limits. An errno not here keeps Go's
// text.
var glibc = map[syscall.Errno]string{
	syscall.EPERM:           "Operation not permitted",
	syscall.ENOENT:          "No such file or directory",
	syscall.EINTR:           "Interrupted system call",
	syscall.EIO:             "Input/output error",
	syscall.EBADF:           "Bad file descriptor",
	syscall.EAGAIN:          "Resource temporarily unavailable",
	syscall.ENOMEM:          "Cannot allocate memory",
	syscall.EACCES:          "Permission denied",
	syscall.EEXIST:          "File exists",
	syscall.ENOTDIR:         "Not a directory",
	syscall.EISDIR:          "Is a directory",
	syscall.EINVAL:          "Invalid argument",
	syscall.ENFILE:          "Too many open files in system",
	syscall.EMFILE:          "Too many open files",
	syscall.ENOSPC:          "No space left on device",
	syscall.EROFS:           "Read-only file system",
	syscall.EPIPE:           "Broken pipe",
	syscall.ENAMETOOLONG:    "File name too long",
	syscall.ENOTSOCK:        "Socket operation on non-socket",
	syscall.EADDRINUSE:      "Address already in use",
	syscall.EADDRNOTAVAIL:   "Cannot assign requested address",
	syscall.ENETDOWN:        "Network is down",
	syscall.ENETUNREACH:     "Network is unreachable",
	syscall.ECONNABORTED:    "Software caused connection abort",
	syscall.ECONNRESET:      "Connection reset by peer",
	syscall.ENOBUFS:         "No buffer space available",
	syscall.ENOTCONN:        "Transport endpoint is not connected",
	syscall.ETIMEDOUT:       "Connection timed out",
	syscall.ECONNREFUSED:    "Connection refused",
	syscall.EHOSTDOWN:       "Host is down",
	syscall.EHOSTUNREACH:    "No route to host",
	syscall.EAFNOSUPPORT:    "Address family not supported by protocol",
	syscall.EPROTONOSUPPORT: "Protocol not supported",
}

// Strerror is glibc's text for e, or Go's where the table has none.
func Strerror(e syscall.Errno) string {
	if s, ok := glibc[e]; ok {
		return s
	}
	return e.Error()
}

// pattern is one errno's Go text and glibc's.
type pattern struct{ goText, cText string }

var patterns = func() []pattern {
	ps := make([]pattern, 0, len(glibc))
	for e, c := range glibc {
		if g := e.Error(); g != c {
			ps = append(ps, pattern{g, c})
		}
	}
	return ps
}()

// Line rewrites each errno text of the table that Go wrote in s to glibc's.
// A text is taken only as a clause of an error chain, where Go's wrapping
// puts it: after ": " or "(" and before the end, ")", ",", ";" or a line
// break ("dial tcp 127.0.0.1:1: connect: connection refused"). Lines with
// no such text come back as they are, without copying.
func Line(s string) string {
	for _, p := range patterns {
		for from := 0; ; {
			i := strings.Index(s[from:], p.goText)
			if i < 0 {
				break
			}
			i += from
			end := i + len(p.goText)
			from = end
			if !clauseStart(s, i) || !clauseEnd(s, end) {
				continue
			}
			s = s[:i] + p.cText + s[end:]
			from = i + len(p.cText)
		}
	}
	return s
}

func clauseStart(s string, i int) bool {
	return strings.HasSuffix(s[:i], ": ") || strings.HasSuffix(s[:i], "(")
}

func clauseEnd(s string, end int) bool {
	return end == len(s) || strings.IndexByte("),;\n", s[end]) >= 0
}
