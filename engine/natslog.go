package engine

import (
	"fmt"

	"github.com/rs/zerolog"
)

// natsLogger sends the embedded nats-server's log lines through the engine's logger.
type natsLogger struct{ log zerolog.Logger }

func (l natsLogger) Noticef(format string, v ...any) { l.log.Info().Msg(fmt.Sprintf(format, v...)) }
func (l natsLogger) Warnf(format string, v ...any)   { l.log.Warn().Msg(fmt.Sprintf(format, v...)) }
func (l natsLogger) Errorf(format string, v ...any)  { l.log.Error().Msg(fmt.Sprintf(format, v...)) }
func (l natsLogger) Debugf(format string, v ...any)  { l.log.Debug().Msg(fmt.Sprintf(format, v...)) }
func (l natsLogger) Tracef(format string, v ...any)  { l.log.Trace().Msg(fmt.Sprintf(format, v...)) }

// Fatalf logs at error level only: the server's fatal path exits the process, which an embedded
// server must not do behind the engine's back.
func (l natsLogger) Fatalf(format string, v ...any) { l.log.Error().Msg(fmt.Sprintf(format, v...)) }
