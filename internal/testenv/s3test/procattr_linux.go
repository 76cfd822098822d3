package s3test

import "syscall"

// procAttr makes the server die with the test binary even if the binary is
// killed before Main can stop it.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
