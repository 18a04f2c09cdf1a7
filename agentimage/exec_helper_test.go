package main_test

import "os/exec"

func execIn(container string, argv ...string) (string, error) {
	out, err := exec.Command("docker", append([]string{"exec", container}, argv...)...).CombinedOutput()
	return string(out), err
}
