"""A real Kubernetes control plane for the tests and the demo: kube-apiserver, etcd,
kube-scheduler and kube-controller-manager built from their upstream Go modules, started on
loopback. The portal never imports it; kubesim plays the kubelets against it."""
