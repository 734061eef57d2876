// An ask's page, made nicer where scripts run (it works without this file):
// * typing in a single-select question's Other… text picks its Other… radio button, so the text
//   is the answer without a second step;
// * live updates (Server-Sent Events): the status part is replaced when someone else submits;
//   the page reloads when the ask ends (its final state, without the form), unless this page's
//   own submit is on its way.
"use strict";
(function () {
  document.querySelectorAll("textarea[data-choice]").forEach(function (text) {
    text.addEventListener("input", function () {
      var choice = document.getElementById(text.getAttribute("data-choice"));
      if (choice && text.value.trim()) { choice.checked = true; }
    });
  });
  var status = document.getElementById("status");
  if (!status || !window.EventSource) { return; }
  var url = status.getAttribute("data-events");
  if (!url) { return; }
  var source = new EventSource(url);
  source.addEventListener("progress", function (event) {
    var doc = new DOMParser().parseFromString(event.data, "text/html");
    status.replaceChildren.apply(status, Array.prototype.slice.call(doc.body.childNodes));
  });
  source.addEventListener("ended", function () {
    source.close();
    window.location.reload();
  });
  source.addEventListener("gone", function () { source.close(); });
  // one's own submit ends the ask too: its answer page must not lose to a reload of this one
  document.querySelectorAll("form[method=post]").forEach(function (form) {
    form.addEventListener("submit", function () { source.close(); });
  });
})();
