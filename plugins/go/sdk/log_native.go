//go:build !wasip1

package wr

import (
	"fmt"
	"os"
)

func hostLog(level LogLevel, message string) {
	fmt.Fprintf(os.Stderr, "[plugin %s] %s\n", level, message)
}
