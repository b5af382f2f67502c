import { updateJson } from "exactlock";

const file = "/tmp/counter.json"; // its lock is the directory /tmp/counter.json.lock
const result = await updateJson<{ count: number }>(file, (data) => ({ count: (data?.count ?? 0) + 1 }));
console.log(result.written); // true
