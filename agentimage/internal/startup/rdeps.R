# sandgate's R dependency step: Rscript rdeps.R <library> <repository> [<package> <version>]...
# Installs into <library> (created, and put first on the library path) every package that no library on the path
# has in a version satisfying its <version> ("" or "*": any; "1.2" or ">=1.2": a minimum; ">", "==", "<=", "<"),
# from <repository>; with an empty <repository> nothing is installed and only the check runs (make profile-images
# uses it after apt installed Debian's r-cran-* packages). install.packages() only warns when a package cannot be
# installed, so every package is checked again afterwards (installed, version, loads) and the exit status is 1 with
# one line per problem.
args <- commandArgs(trailingOnly = TRUE)
lib <- args[1]
repo <- args[2]
spec <- matrix(args[-(1:2)], nrow = 2)
pkgs <- spec[1, ]
wants <- spec[2, ]
if (nzchar(lib)) {
  dir.create(lib, recursive = TRUE, showWarnings = FALSE)
  .libPaths(c(lib, .libPaths()))
}
problem <- function(name, want) {
  v <- tryCatch(utils::packageVersion(name), error = function(e) NULL)
  if (is.null(v)) return("not installed")
  if (!want %in% c("", "*")) {
    op <- regmatches(want, regexpr("^[<>=]*", want))
    need <- package_version(substring(want, nchar(op) + 1))
    if (op == "") op <- ">="
    ok <- switch(op, ">=" = v >= need, ">" = v > need, "==" = v == need, "<=" = v <= need, "<" = v < need, FALSE)
    if (!isTRUE(ok)) return(sprintf("version %s does not satisfy %s", format(v), want))
  }
  if (!requireNamespace(name, quietly = TRUE)) return(sprintf("version %s is installed but does not load", format(v)))
  ""
}
check <- function() unlist(mapply(problem, pkgs, wants, USE.NAMES = FALSE))
state <- check()
if (any(state == "")) {
  have <- pkgs[state == ""]
  cat("already present:", paste(have, vapply(have, function(p) format(utils::packageVersion(p)), ""), collapse = ", "), "\n")
}
need <- pkgs[state != ""]
if (length(need) > 0 && nzchar(repo)) {
  cat("installing into", lib, "from", repo, ":", need, "\n")
  flush(stdout()) # before the installer's own output, which goes straight to the same pipe
  utils::install.packages(need, lib = lib, repos = repo)
  state <- check()
}
if (any(state != "")) {
  flush(stdout()) # the reasons must be the last lines: the agent reports the tail
  where <- if (nzchar(repo)) paste0(" (repository ", repo, ")") else ""
  for (i in which(state != "")) cat(sprintf("R package %s: %s%s\n", pkgs[i], state[i], where), file = stderr())
  quit(save = "no", status = 1)
}
cat("R packages ready:", pkgs, "\n")
