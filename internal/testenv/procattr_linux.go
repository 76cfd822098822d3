package testenv

import "syscall"

// ChildProcAttr is the SysProcAttr for a long-running child a test starts
// (a server): the kernel sends it SIGKILL when the test binary dies, even by
// SIGKILL or a panic that skips every cleanup, and it gets its own process
// group, so a terminal's ^C reaches the test binary alone and the test
// decides how its children stop.
//
// Pdeathsig fires when the OS thread that started the child exits; Go
// only retires threads that a goroutine locked and left locked, which no
// test helper does.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
