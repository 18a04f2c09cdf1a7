// Loaded as a classic script before a page's module (terminal.js, desktop.js). A module script runs only when its
// whole import graph loaded; one file of it lost on the way (a network change, a dropped connection on a busy
// machine) leaves the page on its initial "Connecting…" for good, with no script left to notice. This one notices:
// when the document has loaded and the module never started, it says so and reloads the page with backoff. The
// page's URL carries no ticket (the ticket was spent and swapped for the session cookie), so a reload is safe.
(function () {
  'use strict';
  var key = 'sandgate.reloads.' + location.pathname;
  function started() { return document.documentElement.dataset.started === '1'; }
  window.addEventListener('load', function () {
    if (started()) {
      sessionStorage.removeItem(key);
      return;
    }
    var n = Number(sessionStorage.getItem(key)) || 0;
    var delay = Math.min(1000 * Math.pow(2, n), 15000);
    sessionStorage.setItem(key, String(n + 1));
    var status = document.getElementById('status');
    if (status) status.textContent = 'The page did not load completely; reloading in ' + Math.round(delay / 1000) + ' s…';
    setTimeout(function () { if (!started()) location.reload(); }, delay);
  });
})();
