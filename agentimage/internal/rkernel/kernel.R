# sandgate's R kernel: one persistent R session; requests and results as lines on fd 3 (in) and fd 4 (out).
# A request is "<id> <timeout_ms> <code as hex>"; a result is "<id>\t<ok>\t<count>\t<timed_out>\t<hex stdout>\t
# <hex stderr>\t<hex error>\t<hex png>,<hex png>...". Hex keeps the protocol free of escaping with base R alone.
# A cell's stdout is also copied, as printed, onto fd 5 (a split sink: R flushes a sink after every write), from
# which the agent streams it; the copy is the result's stdout byte for byte, which is how the agent keeps cells apart.
local({
  # R_LIBS_USER may be a list (the agent puts the workspace library first); R skips directories missing at start.
  libs <- strsplit(Sys.getenv("R_LIBS_USER"), ":", fixed = TRUE)[[1]]
  libs <- libs[nzchar(libs)]
  for (lib in libs) dir.create(lib, recursive = TRUE, showWarnings = FALSE)
  if (length(libs)) .libPaths(c(libs, .libPaths()))
})
options(bitmapType = "cairo", device = function(...) grDevices::png(type = "cairo", ...), warn = 1)

.sandgate <- new.env()
local({
  hex <- function(s) {
    if (is.null(s) || length(s) == 0) return("")
    s <- enc2utf8(paste(s, collapse = "\n"))
    if (!nzchar(s)) return("")
    paste(as.character(charToRaw(s)), collapse = "")
  }
  unhex <- function(h) {
    if (!nzchar(h)) return("")
    n <- nchar(h)
    r <- as.raw(strtoi(substring(h, seq(1, n, 2), seq(2, n, 2)), 16L))
    s <- rawToChar(r)
    Encoding(s) <- "UTF-8"
    s
  }
  readall <- function(path) {
    if (!file.exists(path)) return("")
    size <- file.info(path)$size
    if (is.na(size) || size == 0) return("")
    s <- rawToChar(readBin(path, "raw", size))
    Encoding(s) <- "UTF-8"
    s
  }
  plots <- file.path(tempdir(), "sandgate-plots")
  dir.create(plots, showWarnings = FALSE)
  count <- 0L
  input <- file("/proc/self/fd/3", open = "r")
  output <- file("/proc/self/fd/4", open = "w")
  stream <- file("/proc/self/fd/5", open = "w", raw = TRUE)
  writeLines("ready", output)
  flush(output)
  repeat {
    line <- readLines(input, n = 1L, warn = FALSE)
    if (length(line) == 0L) break
    parts <- strsplit(line, " ", fixed = TRUE)[[1L]]
    id <- parts[1L]
    timeout <- as.numeric(parts[2L]) / 1000
    code <- if (length(parts) >= 3L) unhex(parts[3L]) else ""
    count <- count + 1L
    out_path <- tempfile("out")
    err_path <- tempfile("err")
    out <- file(out_path, open = "wt")
    err <- file(err_path, open = "wt")
    sink(stream)
    sink(out, split = TRUE)
    sink(err, type = "message")
    unlink(list.files(plots, full.names = TRUE))
    grDevices::png(file.path(plots, "plot-%03d.png"), width = 800, height = 600, type = "cairo")
    device <- grDevices::dev.cur()
    failure <- NULL
    timed_out <- FALSE
    setTimeLimit(elapsed = timeout, transient = TRUE)
    tryCatch(
      withCallingHandlers({
        exprs <- parse(text = code, keep.source = FALSE)
        for (e in exprs) {
          v <- withVisible(eval(e, envir = globalenv()))
          if (v$visible) print(v$value)
        }
      }, warning = function(w) {
        message("Warning: ", conditionMessage(w))
        invokeRestart("muffleWarning")
      }),
      error = function(e) {
        msg <- conditionMessage(e)
        if (grepl("reached elapsed time limit", msg, fixed = TRUE)) {
          timed_out <<- TRUE
          msg <- sprintf("execution timed out after %g s", timeout)
        }
        call <- conditionCall(e)
        failure <<- if (!is.null(call) && !timed_out) paste0("Error in ", paste(deparse(call), collapse = " "), ": ", msg) else paste0("Error: ", msg)
      },
      interrupt = function(e) {
        timed_out <<- TRUE
        failure <<- sprintf("Error: execution timed out after %g s", timeout)
      }
    )
    setTimeLimit()
    while (sink.number() > 0L) sink()
    sink(type = "message")
    close(out)
    close(err)
    if (device %in% grDevices::dev.list()) grDevices::dev.off(device)
    images <- character(0)
    for (p in sort(list.files(plots, pattern = "\\.png$", full.names = TRUE))) {
      size <- file.info(p)$size
      if (!is.na(size) && size > 0) images <- c(images, paste(as.character(readBin(p, "raw", size)), collapse = ""))
    }
    result <- paste(id, if (is.null(failure)) "1" else "0", count, if (timed_out) "1" else "0",
      hex(readall(out_path)), hex(readall(err_path)), hex(failure), paste(images, collapse = ","), sep = "\t")
    unlink(c(out_path, err_path))
    writeLines(result, output)
    flush(output)
  }
}, envir = .sandgate)
