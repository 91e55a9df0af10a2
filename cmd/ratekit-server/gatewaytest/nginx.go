//go:build linux

package gatewaytest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// nginxMain is the main configuration around a guide's file, which goes
// where Debian's /etc/nginx/nginx.conf includes conf.d/*.conf: in the http
// block. Every path nginx writes to is under the process's own prefix, so
// that it runs without privileges.
const nginxMain = `worker_processes %d;
events {
    worker_connections 4096;
}
http {
    access_log off;
    client_body_temp_path %[2]s/tmp/body;
    proxy_temp_path %[2]s/tmp/proxy;
    fastcgi_temp_path %[2]s/tmp/fastcgi;
    uwsgi_temp_path %[2]s/tmp/uwsgi;
    scgi_temp_path %[2]s/tmp/scgi;
    include %[2]s/conf/site.conf;
}
`

// StartNginx starts nginx in a prefix of its own under dir, with files
// (paths relative to the configuration's directory, as Debian's
// /etc/nginx) among which site.conf is the http-level configuration,
// listening on addr, and workers worker processes, in the foreground:
// nginx -p -c -g 'daemon off; pid ...; error_log ...'. Run as root, it runs
// as the user nobody, with its prefix given to that user.
func StartNginx(dir, name, addr string, files map[string]string, workers int) (*Proc, error) {
	bin, err := Look("nginx")
	if err != nil {
		return nil, err
	}
	prefix := filepath.Join(dir, name)
	for _, d := range []string{"conf", "logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o755); err != nil {
			return nil, err
		}
	}
	for f, body := range files {
		path := filepath.Join(prefix, "conf", f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(prefix, "conf", "nginx.conf"), []byte(fmt.Sprintf(nginxMain, workers, prefix)), 0o644); err != nil {
		return nil, err
	}
	errLog := filepath.Join(prefix, "logs", "error.log")
	cmd := exec.Command(bin, "-p", prefix, "-e", errLog, "-c", filepath.Join(prefix, "conf", "nginx.conf"),
		"-g", fmt.Sprintf("daemon off; pid %s; error_log %s warn;", filepath.Join(prefix, "logs", "nginx.pid"), errLog))
	if os.Geteuid() == 0 {
		if err := unprivileged(cmd, prefix); err != nil {
			return nil, err
		}
	}
	p := &Proc{Name: name, Addr: addr, logs: []string{errLog}}
	if err := p.start(cmd); err != nil {
		return nil, err
	}
	return p, nil
}

// unprivileged makes cmd run as nobody, owning prefix, with the
// directories above it made traversable.
func unprivileged(cmd *exec.Cmd, prefix string) error {
	u, err := user.Lookup("nobody")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for d := filepath.Dir(prefix); d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if m := fi.Mode().Perm(); m&0o001 == 0 {
			if err := os.Chmod(d, m|0o011); err != nil {
				return err
			}
		}
	}
	err = filepath.Walk(prefix, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return nil
}
