package main

import (
	"fmt"
	"os"

	"github.com/cloudspace-dev/cloudspace-operator/internal/images"
	"github.com/cloudspace-dev/cloudspace-operator/internal/oci"
)

func main() {
	repo, _ := os.Getwd()
	b, _ := images.NewBuilder(repo, func(f string, a ...any) { fmt.Printf(f+"\n", a...) })
	b.Registry = "127.0.0.1:15000"
	old, _ := images.ReadJSON("bin/images.json")
	b.Refs = map[string]string{}
	for k, v := range old {
		b.Refs[k] = v.Ref
	}
	b.Refs["cloudspace/workspace-ide:4.96.4"] = old["busybox:1.35"].Ref
	b.Refs["cloudspace/vm-disk:debian-12"] = old["busybox:1.35"].Ref
	tr, _ := oci.Transport(".real-cluster/pki/ca.crt")
	rs, err := images.Select(images.All("0.1.0"), nil, []string{"cloudspace-operator-bundle", "cloudspace-operator-catalog"})
	if err != nil {
		panic(err)
	}
	built, err := b.Build(rs, tr)
	if err != nil {
		panic(err)
	}
	all := []images.Built{}
	for _, v := range old {
		all = append(all, v)
	}
	all = append(all, built...)
	images.WriteJSON("bin/images.json", all)
}
