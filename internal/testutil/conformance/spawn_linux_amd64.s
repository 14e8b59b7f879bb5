#include "textflag.h"

#define SYS_read		0
#define SYS_rt_sigprocmask	14
#define SYS_clone		56
#define SYS_execve		59
#define SYS_exit_group		231
#define SIG_SETMASK		2

// func rawSpawn(flags, stack uintptr, holdFD int, path *byte, argv, envv **byte) (pid int, errno uintptr)
//
// clone(flags, stack) and, in the child, read one byte from holdFD (unless it is
// negative), unblock signals and execve(path, argv, envv). The child runs nothing but
// this code: with CLONE_VM it shares the parent's memory and must not touch Go state.
// Every value the child needs is in a register before clone; the child's own stack (or,
// without CLONE_VM, its copy of the parent's) holds the scratch words.
TEXT ·rawSpawn(SB),NOSPLIT,$16-64
	// Block all signals so that no Go handler runs in the child.
	MOVQ	$-1, 0(SP)
	MOVQ	$SIG_SETMASK, DI
	LEAQ	0(SP), SI
	LEAQ	8(SP), DX
	MOVQ	$8, R10
	MOVQ	$SYS_rt_sigprocmask, AX
	SYSCALL

	MOVQ	holdFD+16(FP), R12
	MOVQ	path+24(FP), R13
	MOVQ	argv+32(FP), BX
	MOVQ	envv+40(FP), R9
	MOVQ	flags+0(FP), DI
	MOVQ	stack+8(FP), SI
	XORQ	DX, DX
	XORQ	R10, R10
	XORQ	R8, R8
	MOVQ	$SYS_clone, AX
	SYSCALL
	CMPQ	AX, $0
	JEQ	child

	// Parent: restore the signal mask, return the pid or the errno.
	MOVQ	AX, R12
	MOVQ	$SIG_SETMASK, DI
	LEAQ	8(SP), SI
	XORQ	DX, DX
	MOVQ	$8, R10
	MOVQ	$SYS_rt_sigprocmask, AX
	SYSCALL
	CMPQ	R12, $0xfffffffffffff001
	JLS	ok
	MOVQ	$-1, pid+48(FP)
	NEGQ	R12
	MOVQ	R12, errno+56(FP)
	RET
ok:
	MOVQ	R12, pid+48(FP)
	MOVQ	$0, errno+56(FP)
	RET

child:
	CMPQ	R12, $0
	JLT	exec
	MOVQ	R12, DI
	LEAQ	0(SP), SI
	MOVQ	$1, DX
	MOVQ	$SYS_read, AX
	SYSCALL
exec:
	MOVQ	$0, 0(SP)
	MOVQ	$SIG_SETMASK, DI
	LEAQ	0(SP), SI
	XORQ	DX, DX
	MOVQ	$8, R10
	MOVQ	$SYS_rt_sigprocmask, AX
	SYSCALL
	MOVQ	R13, DI
	MOVQ	BX, SI
	MOVQ	R9, DX
	MOVQ	$SYS_execve, AX
	SYSCALL
	MOVQ	$127, DI
	MOVQ	$SYS_exit_group, AX
	SYSCALL
hang:
	JMP	hang
