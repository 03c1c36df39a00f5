package gittest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHServer serves the Git repositories in a directory over SSH: it accepts
// one client key, and runs git upload-pack or git receive-pack for the
// commands Git clients send. It is a real SSH server
// (golang.org/x/crypto/ssh) with an Ed25519 host key.
type SSHServer struct {
	// Addr is 127.0.0.1:port; a repository root/name.git is at
	// ssh://git@Addr/name.git.
	Addr string
	// KnownHosts is a known_hosts line for the server's host key.
	KnownHosts []byte
	// ClientKey is the PEM (OpenSSH format) private key the server accepts.
	ClientKey []byte
	// HostKey is the server's public host key.
	HostKey ssh.PublicKey

	mu       sync.Mutex
	commands []string
}

// NewSSHServer serves the bare repositories below root over SSH and stops
// when tb ends.
func NewSSHServer(tb testing.TB, root string) *SSHServer {
	tb.Helper()
	RequireGit(tb)
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		tb.Fatal(err)
	}
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "lockstep test")
	if err != nil {
		tb.Fatal(err)
	}
	authorized, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), authorized.Marshal()) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &SSHServer{
		Addr:      ln.Addr().String(),
		ClientKey: pem.EncodeToMemory(block),
		HostKey:   hostSigner.PublicKey(),
	}
	s.KnownHosts = []byte(knownhosts.Line([]string{s.Addr}, s.HostKey) + "\n")
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(conn, cfg, root)
			}()
		}
	}()
	return s
}

// Commands returns the Git commands clients ran, in order (for example
// "git-upload-pack '/platform.git'").
func (s *SSHServer) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

func (s *SSHServer) serve(conn net.Conn, cfg *ssh.ServerConfig, root string) {
	defer conn.Close()
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		go s.session(ch, chReqs, root)
	}
}

// session runs the one exec request of a Git client's session.
func (s *SSHServer) session(ch ssh.Channel, reqs <-chan *ssh.Request, root string) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" || len(req.Payload) < 4 {
			_ = req.Reply(false, nil)
			continue
		}
		n := binary.BigEndian.Uint32(req.Payload)
		command := string(req.Payload[4 : 4+n])
		s.mu.Lock()
		s.commands = append(s.commands, command)
		s.mu.Unlock()
		service, arg, _ := strings.Cut(command, " ")
		repo := filepath.Join(root, filepath.Clean("/"+strings.Trim(arg, "'\"")))
		var sub string
		switch service {
		case "git-upload-pack":
			sub = "upload-pack"
		case "git-receive-pack":
			sub = "receive-pack"
		default:
			_ = req.Reply(false, nil)
			continue
		}
		_ = req.Reply(true, nil)
		cmd := exec.Command("git", sub, repo)
		cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + root, "PATH=" + os.Getenv("PATH")}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, io.Discard
		status := uint32(0)
		if err := cmd.Run(); err != nil {
			status = 1
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				status = uint32(exit.ExitCode())
			}
		}
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		return
	}
}
