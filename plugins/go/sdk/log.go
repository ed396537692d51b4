package wr

// LogLevel is how loud a log line is.
type LogLevel uint8

const (
	LogTrace LogLevel = iota
	LogDebug
	LogInfo
	LogWarn
	LogError
)

func (l LogLevel) String() string {
	return [...]string{"trace", "debug", "info", "warn", "error"}[min(int(l), 4)]
}

// Log writes a line to the host's log (tagged by the host with the
// controller and the parent; size and rate are capped). Natively, in
// `go test`, it goes to stderr.
func Log(level LogLevel, message string) { hostLog(level, message) }
