//go:build !linux

package testenv

import "syscall"

// ChildProcAttr is nil off Linux: there is no parent-death signal, so a
// child of a killed test binary can outlive it there.
func ChildProcAttr() *syscall.SysProcAttr { return nil }
