import { NODE_REDIS_5 } from '../helpers/client-cells.js';
import { clientCellContract } from './client-cell-contract.js';

clientCellContract(NODE_REDIS_5);
