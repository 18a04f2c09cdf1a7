/*
 * The process that holds a Pod's namespaces (what the kubelet calls the sandbox image). Nothing can be pulled on
 * the machines that build the test cluster, so scripts/cluster.sh compiles this statically and imports it into
 * containerd. As PID 1 of the Pod it reaps the orphans it inherits, and it ends at once, with status 0, on
 * SIGINT or SIGTERM.
 */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
	(void)sig;
	_exit(0);
}

static void reap(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(void) {
	struct sigaction sa = {0};
	sa.sa_handler = stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;) {
		pause();
	}
}
