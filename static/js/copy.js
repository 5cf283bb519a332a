// Copy buttons: <button data-copy="ID"> copies the value of the input with that id.
(function () {
  "use strict";
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var input = document.getElementById(button.dataset.copy);
      if (!input) return;
      input.select();
      var done = function () {
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = "Copy"; }, 2000);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(input.value).then(done, function () {
          button.textContent = "Press Ctrl+C";
        });
      } else {
        // Plain http on a LAN: the selection is there for Ctrl+C.
        try { if (document.execCommand("copy")) { done(); return; } } catch (e) { /* no */ }
        button.textContent = "Press Ctrl+C";
      }
    });
  });
})();
