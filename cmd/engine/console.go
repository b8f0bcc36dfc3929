package main

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/rocketstore/engine/engine/console"
)

// startConsole makes the console served on the --http address (nil with --no-console) and starts
// its sampler (the charts' last minutes); stop ends the sampler and waits for it. status is the
// overview's status is set once the monitor is up (SetStatus).
func (r *runCmd) startConsole(log zerolog.Logger) (con *console.Console, stop func(), err error) {
	if r.NoConsole {
		return nil, func() {}, nil
	}
	con, err = console.New(console.Options{Addr: r.HTTP, User: r.ConsoleUser, Password: r.ConsolePassword,
		Actions: r.ConsoleActions, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = con.Run(ctx) // returns nil when ctx ends
	}()
	if !console.LoopbackAddr(r.HTTP) && r.ConsolePassword == "" {
		log.Warn().Str("http", r.HTTP).Msg("console: refused on an address other than loopback without console_password; set it to use the console")
	} else {
		log.Info().Str("path", "/console/").Bool("credentials", con.RequiresCredentials()).Bool("actions", r.ConsoleActions).Msg("console")
	}
	return con, func() { cancel(); <-done }, nil
}
