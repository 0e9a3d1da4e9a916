package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"
)

// check is one doctor check: a name and what it found.
type check struct {
	name string
	run  func(ctx context.Context) (string, error)
}

func (m *Main) runDoctor(ctx context.Context, args []string) error {
	fs := m.newFlagSet("doctor", "warren doctor [flags]",
		"Check what warren serve needs: the Docker engine, the base image, the agent binary,\n"+
			"a free port and a writable state directory. Every check runs; any failure exits non-zero.")
	e := &envFlags{fs: fs, getenv: m.Getenv}
	var addr, stateDir, agent, image string
	e.String(&addr, "addr", "127.0.0.1:3000", "address serve will listen on")
	e.String(&stateDir, "state-dir", m.defaultStateDir(), "directory of Warren's database")
	e.String(&agent, "agent", defaultAgentPath(), "path of the warren-agent binary")
	e.String(&image, "base-image", "warren/base", `image of the "base" template`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if e.err != nil {
		return e.err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()

	var cli *client.Client
	checks := []check{
		{"docker engine", func(ctx context.Context) (string, error) {
			c, err := client.New(client.FromEnv)
			if err != nil {
				return "", err
			}
			res, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
			if err != nil {
				c.Close()
				return "", err
			}
			cli = c
			return "reachable, API version " + res.APIVersion, nil
		}},
		{"base image", func(ctx context.Context) (string, error) {
			if cli == nil {
				return "", errors.New("cannot check without the docker engine")
			}
			if _, err := cli.ImageInspect(ctx, image); err != nil {
				return "", fmt.Errorf("%s: %w (build it with: warren image build)", image, err)
			}
			return image + " present", nil
		}},
		{"agent binary", func(context.Context) (string, error) {
			fi, err := os.Stat(agent)
			if err != nil {
				return "", err
			}
			if fi.IsDir() || fi.Mode()&0o111 == 0 {
				return "", fmt.Errorf("%s is not an executable file", agent)
			}
			return agent, nil
		}},
		{"listen address", func(context.Context) (string, error) {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return "", err
			}
			ln.Close()
			return addr + " is free", nil
		}},
		{"state directory", func(context.Context) (string, error) {
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				return "", err
			}
			f, err := os.CreateTemp(stateDir, ".doctor-*")
			if err != nil {
				return "", err
			}
			f.Close()
			os.Remove(f.Name())
			return filepath.Clean(stateDir) + " is writable", nil
		}},
	}
	failed := 0
	for _, c := range checks {
		msg, err := c.run(ctx)
		if err != nil {
			failed++
			fmt.Fprintf(m.Stdout, "FAIL  %-16s %v\n", c.name, err)
			continue
		}
		fmt.Fprintf(m.Stdout, "ok    %-16s %s\n", c.name, msg)
	}
	if cli != nil {
		cli.Close()
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, len(checks))
	}
	return nil
}
