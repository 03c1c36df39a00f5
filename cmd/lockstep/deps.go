package main

import (
	_ "github.com/Masterminds/semver/v3"
	_ "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	_ "github.com/fluxcd/pkg/ssa"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/robfig/cron/v3"
	_ "github.com/spf13/cobra"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/json"
	_ "sigs.k8s.io/yaml"
	_ "go.yaml.in/yaml/v3"
	_ "github.com/google/go-cmp/cmp"
)

func main() {}
