// Command etcd runs etcd's server through etcdmain, for the local test
// control plane only.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
