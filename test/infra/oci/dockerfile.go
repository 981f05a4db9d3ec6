package oci

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"strings"
)

// ParseDockerfile reads what the final stage of a Dockerfile states about the image's
// configuration: ENTRYPOINT, CMD, USER, WORKDIR, ENV, EXPOSE and LABEL, with ARG defaults
// overridden by args. A stage FROM an earlier stage starts from that stage's; a stage FROM an
// image starts empty (what the base image brings is not known here).
func ParseDockerfile(r io.Reader, args map[string]string) (Config, error) {
	lines, err := instructions(r)
	if err != nil {
		return Config{}, err
	}
	p := &dockerfile{args: maps.Clone(args), stages: map[string]Config{}}
	if p.args == nil {
		p.args = map[string]string{}
	}
	for _, l := range lines {
		if err := p.apply(l); err != nil {
			return Config{}, fmt.Errorf("line %d (%s): %w", l.number, l.keyword, err)
		}
	}
	return p.cur, nil
}

// ParseDockerfileFile is ParseDockerfile of the file at p.
func ParseDockerfileFile(p string, args map[string]string) (Config, error) {
	f, err := os.Open(p)
	if err != nil {
		return Config{}, err
	}
	defer f.Close()
	cfg, err := ParseDockerfile(f, args)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", p, err)
	}
	return cfg, nil
}

type instruction struct {
	number        int
	keyword, rest string
}

// instructions joins continued lines and drops comments and blank lines.
func instructions(r io.Reader) ([]instruction, error) {
	var out []instruction
	var cur strings.Builder
	start := 0
	s := bufio.NewScanner(r)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		keyword, rest, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, instruction{start, strings.ToUpper(keyword), strings.TrimSpace(rest)})
		cur.Reset()
	}
	return out, s.Err()
}

type dockerfile struct {
	args   map[string]string
	stages map[string]Config
	// cur is the stage being read, named curName (empty when it has no AS).
	cur     Config
	curName string
	env     map[string]string
}

func (p *dockerfile) apply(in instruction) error {
	rest := p.expand(in.rest)
	switch in.keyword {
	case "ARG":
		k, v, hasDefault := strings.Cut(in.rest, "=")
		if _, set := p.args[k]; !set && hasDefault {
			p.args[k] = strings.Trim(v, `"`)
		}
	case "FROM":
		p.from(rest)
	case "ENTRYPOINT":
		p.cur.Entrypoint, p.cur.Cmd = command(rest), nil
	case "CMD":
		p.cur.Cmd = command(rest)
	case "USER":
		p.cur.User = rest
	case "WORKDIR":
		p.cur.WorkingDir = path.Join(p.cur.WorkingDir, rest)
		if !path.IsAbs(rest) && p.cur.WorkingDir[0] != '/' {
			p.cur.WorkingDir = "/" + p.cur.WorkingDir
		}
	case "ENV":
		return p.setEnv(rest)
	case "EXPOSE":
		for _, port := range strings.Fields(rest) {
			if !strings.Contains(port, "/") {
				port += "/tcp"
			}
			p.cur.ExposedPorts = append(p.cur.ExposedPorts, port)
		}
	case "LABEL":
		pairs, err := keyValues(rest)
		if err != nil {
			return err
		}
		p.cur.Labels = maps.Clone(p.cur.Labels)
		if p.cur.Labels == nil {
			p.cur.Labels = map[string]string{}
		}
		for _, kv := range pairs {
			p.cur.Labels[kv[0]] = kv[1]
		}
	}
	return nil
}

// from ends the stage being read and starts the next: FROM base [AS name].
func (p *dockerfile) from(rest string) {
	if p.curName != "" {
		p.stages[p.curName] = p.cur
	}
	fields := strings.Fields(rest)
	p.cur, p.curName, p.env = Config{}, "", map[string]string{}
	if len(fields) > 0 {
		if prev, ok := p.stages[fields[0]]; ok {
			p.cur = prev
		}
	}
	if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
		p.curName = fields[2]
	}
}

func (p *dockerfile) setEnv(rest string) error {
	var pairs [][2]string
	if k, v, ok := strings.Cut(rest, " "); ok && !strings.Contains(k, "=") {
		pairs = [][2]string{{k, strings.TrimSpace(v)}} // the legacy "ENV KEY value" form
	} else {
		var err error
		if pairs, err = keyValues(rest); err != nil {
			return err
		}
	}
	for _, kv := range pairs {
		p.env[kv[0]] = kv[1]
		p.cur.Env = setEnv(p.cur.Env, kv[0], kv[1])
	}
	return nil
}

// setEnv sets KEY=value in env, in place of an earlier value of KEY.
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if k, _, _ := strings.Cut(e, "="); k != key {
			out = append(out, e)
		}
	}
	return append(out, key+"="+value)
}

// expand replaces $VAR and ${VAR} with the stage's ENV or the build's ARG values.
func (p *dockerfile) expand(s string) string {
	return os.Expand(s, func(k string) string {
		if v, ok := p.env[k]; ok {
			return v
		}
		return p.args[k]
	})
}

// command is an ENTRYPOINT or CMD: the exec form (a JSON array) or the shell form.
func command(rest string) []string {
	var exec []string
	if err := json.Unmarshal([]byte(rest), &exec); err == nil {
		return exec
	}
	return []string{"/bin/sh", "-c", rest}
}

// keyValues splits `k1=v1 k2="v 2"` into pairs, in order.
func keyValues(s string) ([][2]string, error) {
	var out [][2]string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, v, ok := strings.Cut(s, "=")
		if !ok || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("%q is not key=value", s)
		}
		if strings.HasPrefix(v, `"`) {
			end := strings.Index(v[1:], `"`)
			if end < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", s)
			}
			out = append(out, [2]string{k, v[1 : end+1]})
			s = v[end+2:]
			continue
		}
		value, next, _ := strings.Cut(v, " ")
		out = append(out, [2]string{k, value})
		s = next
	}
	return out, nil
}
