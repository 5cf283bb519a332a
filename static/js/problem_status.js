// While a problem is pending or validating, ask the API for its status every 2 s and reload the
// page once it changes (the session cookie authenticates the GET); meanwhile keep its place in
// the validation queue up to date.
(function () {
  "use strict";
  var badge = document.getElementById("problem-status");
  if (!badge || !badge.dataset.pollUrl) return;
  countValidation();
  var url = badge.dataset.pollUrl;
  var status = badge.dataset.status;
  var failures = 0;

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.status === 401 || response.status === 404) {
          return null; // logged out, or no longer visible: stop quietly
        }
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (problem) {
        if (problem === null) return;
        failures = 0;
        if (problem.status !== status) {
          window.location.reload();
          return;
        }
        var position = document.querySelector('[data-field="queue-position"] strong');
        if (position && problem.queue_position) position.textContent = problem.queue_position;
        setTimeout(poll, 2000);
      })
      .catch(function () {
        failures += 1; // the server restarting: keep trying, more slowly
        setTimeout(poll, Math.min(2000 * (failures + 1), 30000));
      });
  }
  setTimeout(poll, 2000);

  // "validating for 12 s": counted on from the seconds the server gave, by this page's own
  // clock (a browser's wall clock may be set apart from the server's), in the server's format
  // (webapp/durations.py).
  function countValidation() {
    var node = document.querySelector('[data-field="validating-for"]');
    if (!node || node.dataset.seconds === "") return;
    var base = Number(node.dataset.seconds), loaded = performance.now();
    setInterval(function () {
      node.textContent = duration(base + (performance.now() - loaded) / 1000);
    }, 1000);
  }

  function duration(seconds) {
    if (seconds < 90) return Math.round(seconds) + " s";
    var minutes = Math.round(seconds / 60);
    if (minutes < 90) return minutes + " min";
    var hours = Math.floor(minutes / 60), rest = minutes % 60;
    return rest ? hours + " h " + rest + " min" : hours + " h";
  }
})();
