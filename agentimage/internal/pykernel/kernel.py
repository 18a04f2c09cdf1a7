# The sandbox's persistent Python kernel, started by the agent (package pykernel) and driven over two pipes:
# fd 3 carries requests and fd 4 replies, one JSON object per line. The cell's own output goes to the real fd 1 and
# fd 2, which the agent reads; after each cell a marker written to both tells the agent the cell's output is complete.
# Only the standard library is used; matplotlib is touched only when the cell imported it.
import ast
import base64
import builtins
import io
import json
import linecache
import os
import signal
import sys
import traceback
import types
import warnings

requests = os.fdopen(3, "r", encoding="utf-8")
replies = os.fdopen(4, "w", encoding="utf-8")

# SIGINT interrupts a running cell (the agent's timeout) and is ignored between cells, so a late interrupt can never
# hit the kernel's own loop.
running = [False]


def on_sigint(signum, frame):
    if running[0]:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, on_sigint)

# Agg cannot show windows; plt.show() is a no-op there and the figures are returned instead, so its warning is noise.
warnings.filterwarnings("ignore", message=".*non-interactive.*")

main = types.ModuleType("__main__")
main.__dict__["__builtins__"] = builtins
sys.modules["__main__"] = main
namespace = main.__dict__
KERNEL_FILE = sys._getframe().f_code.co_filename
count = 0


def reply(obj):
    replies.write(json.dumps(obj) + "\n")
    replies.flush()


def format_error(etype, evalue, tb):
    # Drop the kernel's own frames so the traceback starts in the cell.
    while tb is not None and tb.tb_frame.f_code.co_filename == KERNEL_FILE:
        tb = tb.tb_next
    return {
        "ename": etype.__name__,
        "evalue": str(evalue),
        "traceback": traceback.format_exception(etype, evalue, tb),
    }


def capture_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    images = []
    try:
        for num in plt.get_fignums():
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png", bbox_inches="tight")
            images.append(base64.b64encode(buf.getvalue()).decode("ascii"))
    finally:
        plt.close("all")
    return images


# The rich representations of a trailing value, by MIME type, as Jupyter front ends read them (the E2B code
# interpreter answers them as a result's html, markdown, svg, png, ...). Bytes travel base64; what JSON cannot carry
# is left out.
RICH = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"), ("image/svg+xml", "_repr_svg_"),
        ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"), ("text/latex", "_repr_latex_"),
        ("application/json", "_repr_json_"), ("application/javascript", "_repr_javascript_"),
        ("application/pdf", "_repr_pdf_"))


def rich_formats(value):
    out = {}
    if isinstance(value, type):
        return out
    for mime, name in RICH:
        try:
            method = getattr(value, name, None)
            if not callable(method):
                continue
            data = method()
            if isinstance(data, tuple):
                data = data[0]
            if data is None:
                continue
            if isinstance(data, bytes):
                data = base64.b64encode(data).decode("ascii")
            json.dumps(data)
        except Exception:
            continue
        out[mime] = data
    return out


def run_cell(code, filename):
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, filename, "exec"), namespace)
    if last is not None:
        value = eval(compile(last, filename, "eval"), namespace)
        if value is not None:
            namespace["_"] = value
            return repr(value), rich_formats(value)
    return None, {}


def flush_streams(marker):
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    for fd in (1, 2):
        try:
            os.write(fd, marker)
        except OSError:
            pass


def handle(msg):
    global count
    count += 1
    out = {"id": msg["id"], "ok": True, "result": None, "error": None, "images": [], "execution_count": count}
    try:
        try:
            running[0] = True
            out["result"], out["formats"] = run_cell(msg["code"], "<cell-%d>" % count)
        finally:
            running[0] = False
    except BaseException:  # SystemExit and KeyboardInterrupt are the cell's errors too; the kernel goes on
        out["ok"] = False
        out["error"] = format_error(*sys.exc_info())
    try:
        out["images"] = capture_figures()
    except Exception as e:
        sys.stderr.write("capturing figures: %r\n" % (e,))
    return out


def serve():
    reply({"ready": True, "python": sys.version, "pid": os.getpid()})
    for line in requests:
        msg = json.loads(line)
        try:
            out = handle(msg)
        except KeyboardInterrupt:  # an interrupt that landed just as the cell finished
            out = {"id": msg["id"], "ok": False, "result": None, "images": [], "execution_count": count,
                   "error": {"ename": "KeyboardInterrupt", "evalue": "", "traceback": ["KeyboardInterrupt\n"]}}
        flush_streams(msg["marker"].encode("utf-8"))
        reply(out)


serve()
