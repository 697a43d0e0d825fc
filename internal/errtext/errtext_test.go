package errtext

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestStrerror(t *testing.T) {
	for e, want := range map[syscall.Errno]string{
		syscall.ENOENT:       "No such file or directory",
		syscall.ECONNREFUSED: "Connection refused",
		syscall.EACCES:       "Permission denied",
		syscall.EADDRINUSE:   "Address already in use",
		syscall.EMFILE:       "Too many open files",
		syscall.Errno(0x7ff): syscall.Errno(0x7ff).Error(), // not in the table: Go's
	} {
		if got := Strerror(e); got != want {
			t.Errorf("Strerror(%d) = %q, want %q", int(e), got, want)
		}
	}
}

// Line turns the errno text of Go's error chains into glibc's, and leaves
// the same words alone elsewhere.
func TestLine(t *testing.T) {
	_, openErr := os.Open("/nonexistent/pgturnstile.ini")
	if !errors.Is(openErr, fs.ErrNotExist) {
		t.Fatal(openErr)
	}
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for in, want := range map[string]string{
		"cannot load config file: " + openErr.Error():                  "cannot load config file: open /nonexistent/pgturnstile.ini: No such file or directory",
		"closing because: connect failed (" + dialErr.Error() + ")":    "closing because: connect failed (dial tcp: connect: Connection refused)",
		"Cannot open logfile: '/x': open /x: permission denied":        "Cannot open logfile: '/x': open /x: Permission denied",
		"accept: too many open files; retrying":                        "accept: Too many open files; retrying",
		"read: connection reset by peer\nnext: broken pipe":            "read: Connection reset by peer\nnext: Broken pipe",
		"login attempt: db=appdb user=app tls=no":                      "login attempt: db=appdb user=app tls=no",
		"the file exists in permission denied mode":                    "the file exists in permission denied mode",
		"ERROR: could not open file: no such file or directory at all": "ERROR: could not open file: no such file or directory at all",
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

func TestLineDoesNotAllocateWithoutAnErrno(t *testing.T) {
	s := "C-1: appdb/app@127.0.0.1:5555 login attempt: db=appdb user=app tls=no replication=no"
	if n := testing.AllocsPerRun(100, func() { _ = Line(s) }); n != 0 {
		t.Errorf("Line allocates %v times on a line with no errno text", n)
	}
}
