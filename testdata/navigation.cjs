// Navigation for the browser tests that survives Chromium dropping requests on a network change. Shared by
// testdata/example_browser.cjs, testdata/sibling_origin_browser.cjs and caddymodule/testdata/pages_browser.cjs.
//
// Chromium drops in-flight requests when an interface on the machine changes (ERR_NETWORK_CHANGED): Docker adds and
// removes bridges and veths for every container that other tests start. A navigation dropped that way either
// rejects page.goto with that error or never settles; one whose document arrived but whose scripts or styles were
// dropped loads a page that never runs. So goto watches the main frame's failed requests while it loads, the
// document's and its subresources', and navigates again as soon as one shows the drop, instead of waiting for
// page.goto or the page's own progress to time out.

const dropText = /ERR_NETWORK_CHANGED/;

// droppedNavigation resolves when a request of page's main frame (its document or a subresource) fails because the
// network changed. cancel stops watching.
function droppedNavigation(page) {
  let cancel;
  const dropped = new Promise((resolve) => {
    const onFailed = (r) => {
      if (r.frame() === page.mainFrame() && dropText.test((r.failure() || {}).errorText || '')) {
        resolve('dropped');
      }
    };
    page.on('requestfailed', onFailed);
    cancel = () => page.off('requestfailed', onFailed);
  });
  return { dropped, cancel };
}

// goto opens url in page and returns page.goto's response, again after a navigation the network change dropped
// (up to attempts times). With fresh it opens fresh(url) instead: a ticket URL's navigation may have reached the
// gateway and spent the ticket before Chromium dropped it. log, when given, says when a navigation is repeated.
async function goto(page, url, { fresh, log, attempts = 10 } = {}) {
  for (let i = 1; ; i++) {
    const watch = droppedNavigation(page);
    const navigation = page.goto(url);
    navigation.catch(() => {}); // after a drop, the next goto interrupts it; its rejection is expected then
    let outcome;
    try {
      outcome = await Promise.race([navigation, watch.dropped]);
    } catch (e) {
      if (!dropText.test(String(e))) throw e;
      outcome = 'dropped';
    } finally {
      watch.cancel();
    }
    if (outcome !== 'dropped') return outcome;
    if (i >= attempts) throw new Error('the network changed under ' + attempts + ' navigations in a row to ' + url);
    if (log) log('navigating again after a network change dropped the navigation to ' + url.replace(/ticket=[^&]+/, 'ticket=…'));
    await page.waitForTimeout(500 * i);
    if (fresh) url = await fresh(url);
  }
}

module.exports = { goto };
