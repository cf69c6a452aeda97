// The library's drop zone: files and whole folders dropped on it are put in
// the file input and uploaded at once. Without JavaScript the input still
// works as an ordinary multi-file picker.
(function () {
  "use strict";
  const zone = document.getElementById("dropzone");
  const input = document.getElementById("upload-files");
  const form = document.getElementById("upload-form");
  if (!zone || !input || !form) return;

  function readEntries(reader) {
    return new Promise((resolve, reject) => reader.readEntries(resolve, reject));
  }

  async function filesOf(entry) {
    if (entry.isFile) {
      return [await new Promise((resolve, reject) => entry.file(resolve, reject))];
    }
    if (!entry.isDirectory) return [];
    const reader = entry.createReader();
    const found = [];
    for (;;) {
      const batch = await readEntries(reader);  // a directory reads in batches
      if (!batch.length) break;
      for (const child of batch) found.push(...(await filesOf(child)));
    }
    return found;
  }

  function submit(files) {
    const transfer = new DataTransfer();
    for (const file of files) transfer.items.add(file);
    input.files = transfer.files;
    if (window.htmx) htmx.trigger(form, "submit"); else form.requestSubmit();
  }

  ["dragenter", "dragover"].forEach((name) => zone.addEventListener(name, (event) => {
    event.preventDefault();
    zone.classList.add("dragging");
  }));
  ["dragleave", "drop"].forEach((name) => zone.addEventListener(name, () => zone.classList.remove("dragging")));

  zone.addEventListener("drop", async (event) => {
    event.preventDefault();
    const items = Array.from(event.dataTransfer.items || []);
    const entries = items.map((item) => item.webkitGetAsEntry && item.webkitGetAsEntry()).filter(Boolean);
    let files;
    if (entries.length) {
      files = (await Promise.all(entries.map(filesOf))).flat();
      // Files in a dropped folder: only the kinds the library takes, so a
      // folder with images in it does not fill the page with refusals.
      if (entries.some((entry) => entry.isDirectory)) {
        files = files.filter((file) => /\.(md|markdown|txt)$/i.test(file.name));
      }
    } else {
      files = Array.from(event.dataTransfer.files || []);
    }
    if (files.length) submit(files);
  });

  input.addEventListener("change", () => { if (input.files.length) htmx.trigger(form, "submit"); });
})();
